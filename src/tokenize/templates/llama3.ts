// Llama 3 (8B/70B-Instruct) chat template, as published in meta-llama/Meta-Llama-3-8B-Instruct's
// tokenizer_config.json: bos_token, then `<|start_header_id|>{role}<|end_header_id|>\n\n{content|trim}<|eot_id|>`
// per message, no default system message.
export const LLAMA3_TEMPLATE =
  "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
