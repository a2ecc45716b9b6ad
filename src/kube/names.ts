// Kubernetes name rules, as the API server checks them: a namespace is a DNS-1123 label, an object name a DNS-1123
// subdomain. Config checks them so that a typo fails at start, not as a 4xx on every call.
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
export const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
