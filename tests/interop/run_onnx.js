// Runs every <name>.onnx of a directory written by onnx_cases in ONNX Runtime on <name>.input.bin and
// compares the result with dtrain's <name>.output.bin. Usage: node run_onnx.js <directory> <name>...
// Exits 1 when a model does not load, gives another shape, or differs by more than 1e-4 times the
// output's largest magnitude (at least 1e-4).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function floats(file) {
    const b = fs.readFileSync(file);
    return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
}

async function check(dir, name) {
    const base = path.join(dir, name);
    const shapes = JSON.parse(fs.readFileSync(base + '.json', 'utf8'));
    const session = await ort.InferenceSession.create(base + '.onnx');
    const input = new ort.Tensor('float32', floats(base + '.input.bin'), shapes.input);
    const result = await session.run({input});
    const got = result.output;
    const want = floats(base + '.output.bin');
    if (JSON.stringify(Array.from(got.dims)) !== JSON.stringify(shapes.output))
        throw new Error(`${name}: ONNX Runtime gives shape [${got.dims}], dtrain [${shapes.output}]`);
    let diff = 0;
    let scale = 0;
    for (let i = 0; i < want.length; ++i) {
        diff = Math.max(diff, Math.abs(got.data[i] - want[i]));
        scale = Math.max(scale, Math.abs(want[i]));
    }
    const tolerance = 1e-4 * Math.max(scale, 1);
    const ok = diff <= tolerance;  // false for NaN too
    console.log(`${name}: max abs difference ${diff.toExponential(3)}, ` +
                `output scale ${scale.toExponential(3)}, tolerance ${tolerance.toExponential(3)}: ` +
                (ok ? 'ok' : 'FAILED'));
    return ok;
}

async function main() {
    const [dir, ...names] = process.argv.slice(2);
    if (!dir || names.length === 0) throw new Error('usage: node run_onnx.js <directory> <name>...');
    let ok = true;
    for (const name of names)
        ok = (await check(dir, name)) && ok;
    process.exit(ok ? 0 : 1);
}

main().catch((e) => {
    console.error(`run_onnx.js: ${e.message}`);
    process.exit(1);
});
