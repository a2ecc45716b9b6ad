// EAR's ChatML template for tokenizers that publish none (tiktoken encodings, `character`).
// OpenAI publishes no chat template for o200k_base/cl100k_base, so this is EAR's choice: plain ChatML
// (`<|im_start|>{role}\n{content}<|im_end|>\n`), tools listed as JSON in a leading system turn and tool calls
// written as `<tool_call>` JSON inside the assistant turn, in the shape Qwen's ChatML templates use.
export const CHATML_TEMPLATE = `
{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}
{{- '# Tools\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}
{{- '\\n</tools><|im_end|>\\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{%- if not (loop.first and message.role == 'system') %}
{{- '<|im_start|>' + message.role + '\\n' + message.content }}
{%- if message.tool_calls %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function %}{%- set tool_call = tool_call.function %}{%- endif %}
{{- '\\n<tool_call>\\n{"name": "' + tool_call.name + '", "arguments": ' + (tool_call.arguments | tojson) + '}\\n</tool_call>' }}
{%- endfor %}
{%- endif %}
{{- '<|im_end|>\\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}`;
