// The browser twin of greedy.mjs: loads /models/NAME with transformers.js's web build and default
// options (no file names, no dtype: in a browser that means the wasm device and, unless the
// folder's config.json says otherwise, dtype q8) and writes, as JSON into #result, the prompt's
// token ids and the greedy continuation's. Anything that goes wrong lands in #error.
import { env, AutoModelForCausalLM, AutoTokenizer } from '@huggingface/transformers';

const params = new URLSearchParams(location.search);
const name = params.get('model');
const prompt = params.get('prompt') ?? '';
const maxNew = Number(params.get('new') ?? '20');
const status = document.getElementById('status');

try {
    env.allowRemoteModels = false;
    env.allowLocalModels = true;
    env.localModelPath = '/models/';
    // ONNX Runtime Web's wasm from this server, not the CDN; one thread needs no SharedArrayBuffer
    // (so no cross-origin isolation headers)
    env.backends.onnx.wasm.wasmPaths = '/node_modules/onnxruntime-web/dist/';
    env.backends.onnx.wasm.numThreads = 1;

    status.textContent = `loading ${name}`;
    const tokenizer = await AutoTokenizer.from_pretrained(name);
    const model = await AutoModelForCausalLM.from_pretrained(name);
    status.textContent = `generating with ${name}`;
    const inputs = tokenizer(prompt, { add_special_tokens: false });
    const output = await model.generate({ ...inputs, max_new_tokens: maxNew, do_sample: false });
    const promptIds = Array.from(inputs.input_ids.data, Number);
    const all = Array.from(output.data, Number);
    document.getElementById('result').textContent = JSON.stringify({
        prompt_ids: promptIds,
        generated_ids: all.slice(promptIds.length),
        dtype: model.config?.['transformers.js_config']?.dtype ?? null,
        crossOriginIsolated: self.crossOriginIsolated,
    });
    status.textContent = 'done';
} catch (err) {
    console.error(err);
    document.getElementById('error').textContent = String(err?.stack ?? err);
    status.textContent = 'failed';
}
