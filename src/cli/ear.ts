#!/usr/bin/env node
// The `ear` command: the first argument picks a subcommand module, which gets the remaining arguments.
// Adding one is one line below: a module exporting `main(argv): Promise<number | void>` (exit code).

interface Command {
  summary: string;
  load: () => Promise<{ main: (argv: string[]) => Promise<number | void> }>;
}

const commands: Record<string, Command> = {
  epp: { summary: 'run as a Gateway API Inference Extension endpoint picker (Envoy ext_proc on gRPC)', load: () => import('./epp.js') },
  eval: { summary: 'compare routing policies on a workload (discrete-event or end-to-end) and write a report', load: () => import('./eval.js') },
  serve: { summary: 'run the gateway in front of engines (or --demo N simulated ones)', load: () => import('./serve.js') },
  sim: { summary: 'run a simulated engine that speaks vLLM (OpenAI API, /metrics, KV events, kv_transfer_params)', load: () => import('./sim.js') }
};

function usage (): string {
  const width = Math.max(...Object.keys(commands).map((c) => c.length));
  return ['usage: ear <command> [options]', '', 'commands:',
    ...Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`),
    '', 'Run `ear <command> --help` for the options of one command.'].join('\n');
}

async function run (argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    console.log(usage());
    return name === undefined ? 2 : 0;
  }
  const cmd = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (cmd === undefined) {
    console.error(`ear: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  const mod = await cmd.load();
  return (await mod.main(rest)) ?? 0;
}

run(process.argv.slice(2)).then((code) => {
  if (code !== 0) process.exitCode = code;
}, (err: unknown) => {
  console.error(`ear: ${(err as Error)?.message ?? String(err)}`);
  process.exitCode = 1;
});
