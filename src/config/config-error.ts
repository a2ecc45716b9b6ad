// The one error a configuration that does not hold raises: `config <path>: <rule>`, naming the field and the rule.
import { EarError } from '../errors/errors.js';

export class ConfigError extends EarError {
  constructor (path: string, rule: string) {
    super('EAR_ERR_CONFIG', `config ${path}: ${rule}`);
    this.name = 'ConfigError';
  }
}
