// Metric names in PromQL expressions (Grafana dashboards, Prometheus rules), parsed with the Prometheus
// project's own grammar (@prometheus-io/lezer-promql), and the names a live /metrics page exports.
import { parser } from '@prometheus-io/lezer-promql';

/** Grafana's variables as PromQL sees them after interpolation: durations become one; others are inside quotes. */
export function interpolate (expr: string): string {
  return expr.replace(/\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}/g, '5m');
}

export interface Selector { name: string; labels: string[] }
export interface ParsedExpr { names: string[]; selectors: Selector[]; errors: string[] }

/** The metric names an expression selects, and its syntax errors (with where). */
export function parseExpr (expr: string): ParsedExpr {
  const q = interpolate(expr);
  const names: string[] = [];
  const selectors: Selector[] = [];
  const errors: string[] = [];
  parser.parse(q).iterate({
    enter: (n) => {
      if (n.type.isError) errors.push(`syntax error at ${n.from} in ${JSON.stringify(q)}`);
      if (n.name === 'Identifier' && n.node.parent?.name === 'VectorSelector') names.push(q.slice(n.from, n.to));
      if (n.name === 'VectorSelector') {
        const id = n.node.getChild('Identifier');
        const matchers = n.node.getChild('LabelMatchers')?.getChildren('UnquotedLabelMatcher') ?? [];
        if (id !== null) selectors.push({ name: q.slice(id.from, id.to), labels: matchers.flatMap((m) => { const l = m.getChild('LabelName'); return l === null ? [] : [q.slice(l.from, l.to)]; }) });
      }
      // {__name__="x"} selects by name where this check cannot follow: refused.
      if (n.name === 'LabelName' && q.slice(n.from, n.to) === '__name__') errors.push(`__name__ matcher in ${JSON.stringify(q)}: name the metric`);
    }
  });
  if (names.length === 0 && errors.length === 0) errors.push(`no metric in ${JSON.stringify(q)}`);
  return { names, selectors, errors };
}

/**
 * The series names a Prometheus text page exports: each family's TYPE name, a histogram's _bucket/_sum/_count and
 * a summary's _sum/_count, and every sample line's name.
 */
export function exportedNames (text: string): Set<string> {
  const out = new Set<string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (type !== null) {
      out.add(type[1]);
      if (type[2] === 'histogram') for (const s of ['_bucket', '_sum', '_count']) out.add(type[1] + s);
      if (type[2] === 'summary') for (const s of ['_sum', '_count']) out.add(type[1] + s);
      continue;
    }
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/.exec(line);
    if (sample !== null) out.add(sample[1]);
  }
  return out;
}

/**
 * Label names each series name carries on a /metrics page (from its sample lines; a family with no sample
 * yet is absent: its labels cannot be checked).
 */
export function exportedLabels (text: string, into = new Map<string, Set<string>>()): Map<string, Set<string>> {
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} /.exec(line);
    if (m === null) continue;
    let set = into.get(m[1]);
    if (set === undefined) into.set(m[1], set = new Set());
    for (const l of m[2].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="/g)) set.add(l[1]);
  }
  return into;
}

/** Labels Prometheus adds when it scrapes a pod (kubernetes_sd / ServiceMonitor target labels). */
export const TARGET_LABELS = new Set(['namespace', 'pod', 'job', 'instance', 'service', 'container', 'endpoint']);

/**
 * Problems with one expression: syntax, names none of `known` exports, and (where `labels` knows the metric)
 * label matchers on labels the metric does not have.
 */
export function exprProblems (where: string, expr: string, known: ReadonlySet<string>, labels?: ReadonlyMap<string, ReadonlySet<string>>): string[] {
  const { names, selectors, errors } = parseExpr(expr);
  const out = [...errors.map((e) => `${where}: ${e}`), ...names.filter((n) => !known.has(n)).map((n) => `${where}: ${n} is exported by neither EAR nor vLLM`)];
  for (const s of selectors) {
    const has = labels?.get(s.name);
    if (has === undefined) continue;
    for (const l of s.labels) if (!has.has(l) && !TARGET_LABELS.has(l)) out.push(`${where}: ${s.name} has no label ${l} (it has ${[...has].join(', ')})`);
  }
  return out;
}

/** Every PromQL expression of a Grafana dashboard: panel targets (rows' nested panels too) and query variables. */
export function dashboardExprs (dash: any): Array<{ where: string; expr: string }> {
  const out: Array<{ where: string; expr: string }> = [];
  const walk = (panels: any[]): void => {
    for (const p of panels ?? []) {
      for (const t of p.targets ?? []) if (typeof t.expr === 'string') out.push({ where: `panel "${p.title}" ${t.refId}`, expr: t.expr });
      walk(p.panels);
    }
  };
  walk(dash.panels);
  for (const v of dash.templating?.list ?? []) {
    if (v.type !== 'query') continue;
    const q: string = typeof v.query === 'string' ? v.query : v.query?.query;
    // label_values(SELECTOR, label), query_result(EXPR), or a bare expression.
    const m = /^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$/s.exec(q) ?? /^\s*query_result\((.*)\)\s*$/s.exec(q);
    out.push({ where: `variable ${v.name}`, expr: m === null ? q : m[1] });
  }
  return out;
}
