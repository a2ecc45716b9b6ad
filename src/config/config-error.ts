// The one error a configuration that does not hold raises: `config <path>: <rule>`, naming the field and the rule.
export class ConfigError extends Error {
  readonly code = 'EAR_ERR_CONFIG';
  constructor (path: string, rule: string) {
    super(`config ${path}: ${rule}`);
    this.name = 'ConfigError';
  }
}
