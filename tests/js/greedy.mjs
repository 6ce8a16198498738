// Loads an exported ONNX folder the way a transformers.js user would (default options: no file
// names, no dtype, no external-data flags) and prints, as one JSON line, the prompt's token ids
// and the greedy continuation's. Run by tests/export/test_export_onnx_js.py.
//
//   node greedy.mjs FOLDER PROMPT [MAX_NEW_TOKENS]
//
// FOLDER is read from disk only (no Hub): its parent is env.localModelPath and its name the model id.
import path from 'node:path';
import { env, AutoModelForCausalLM, AutoTokenizer } from '@huggingface/transformers';

const [folder, prompt, maxNew = '20'] = process.argv.slice(2);
if (!folder || prompt === undefined) {
    console.error('usage: node greedy.mjs FOLDER PROMPT [MAX_NEW_TOKENS]');
    process.exit(2);
}
env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = path.dirname(path.resolve(folder)) + path.sep;
const id = path.basename(path.resolve(folder));

const tokenizer = await AutoTokenizer.from_pretrained(id);
const model = await AutoModelForCausalLM.from_pretrained(id);
const inputs = tokenizer(prompt, { add_special_tokens: false });
const output = await model.generate({ ...inputs, max_new_tokens: Number(maxNew), do_sample: false });
const promptIds = Array.from(inputs.input_ids.data, Number);
const all = Array.from(output.data, Number);
console.log(JSON.stringify({ prompt_ids: promptIds, generated_ids: all.slice(promptIds.length) }));
