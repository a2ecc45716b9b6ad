// @huggingface/jinja (0.5.11, the latest) gives strings `strip`, `lstrip` and `rstrip` methods that ignore their
// argument and trim JavaScript whitespace. The engines render with Python's jinja2, where `s.rstrip('\n')`
// removes only newlines and a bare `s.strip()` removes Python's whitespace (str.isspace). Qwen3's template, for
// one, calls `content.split('</think>')[-1].lstrip('\n')`: "</think>\n\n  code" keeps its indent in vLLM.
// The library does not export its string value class, so the methods are replaced on its prototype, reached
// through a value the public Environment creates. Imported once, for its effect, by chat-template.ts.
import { Environment } from '@huggingface/jinja';

/** Python's str.isspace() characters (strip() without an argument). */
const PYTHON_SPACE = new Set('\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000');

interface RuntimeValue { type: string; value: unknown }
type Builtins = Map<string, unknown>;
type FunctionValueClass = new (fn: (args: RuntimeValue[]) => RuntimeValue) => unknown;
type StringValueClass = new (value: string) => RuntimeValue;

/** The characters to strip: an argument string's characters, or Python's whitespace for none / None. */
function stripSet (args: RuntimeValue[], method: string): (c: string) => boolean {
  const a = args[0];
  if (a === undefined || a.type === 'NullValue' || a.type === 'UndefinedValue') return (c) => PYTHON_SPACE.has(c);
  if (a.type !== 'StringValue') throw new Error(`${method} arg must be None or str`);
  const chars = new Set(a.value as string);
  return (c) => chars.has(c);
}

export function pythonStrip (s: string, left: boolean, right: boolean, strip: (c: string) => boolean): string {
  // Code points, as Python strips them (a surrogate pair is one character).
  const cs = Array.from(s);
  let i = 0;
  let j = cs.length;
  if (left) while (i < j && strip(cs[i])) i++;
  if (right) while (j > i && strip(cs[j - 1])) j--;
  return i === 0 && j === cs.length ? s : cs.slice(i, j).join('');
}

function patch (): void {
  const env = new Environment();
  env.set('s', '');
  const sample = env.lookupVariable('s') as unknown as RuntimeValue & { builtins: Builtins };
  const proto = Object.getPrototypeOf(sample) as object;
  const desc = Object.getOwnPropertyDescriptor(proto, 'builtins');
  const upper = sample.builtins.get('upper');
  if (desc?.get === undefined || upper === undefined || sample.type !== 'StringValue') {
    throw new Error('@huggingface/jinja changed: cannot give its strings Python\'s strip methods');
  }
  const original = desc.get;
  const FunctionValue = (upper as object).constructor as FunctionValueClass;
  const StringValue = sample.constructor as StringValueClass;
  const fixed = new WeakSet<Builtins>();
  Object.defineProperty(proto, 'builtins', {
    configurable: true,
    get (this: RuntimeValue) {
      const map = original.call(this) as Builtins;
      if (fixed.has(map)) return map;
      const value = this.value as string;
      for (const [method, left, right] of [['strip', true, true], ['lstrip', true, false], ['rstrip', false, true]] as const) {
        map.set(method, new FunctionValue((args) => new StringValue(pythonStrip(value, left, right, stripSet(args, method)))));
      }
      fixed.add(map);
      return map;
    }
  });
}

patch();
