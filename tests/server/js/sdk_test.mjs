// The official OpenAI Node SDK (openai@6.49.0, unchanged apart from baseURL) and plain curl
// against a running `ltx serve`. Run through run_js.sh, which sets:
//   LTX_SERVE_URL      the server, e.g. http://127.0.0.1:8000
//   LTX_SERVE_API_KEY  its --api-key, or empty when it has none
//   LTX_JS_TIMEOUT_S   how long a job may take (default 300)
// Exits non-zero at the first check that fails, naming it.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';

import OpenAI, {
  AuthenticationError,
  BadRequestError,
  ConflictError,
  NotFoundError,
  toFile,
  UnprocessableEntityError,
} from 'openai';

const url = process.env.LTX_SERVE_URL;
if (!url) throw new Error('LTX_SERVE_URL is not set: run this through run_js.sh');
const key = process.env.LTX_SERVE_API_KEY || '';
const timeoutMs = Number(process.env.LTX_JS_TIMEOUT_S || 300) * 1000;

// The SDK refuses to start without a key; a server without one ignores it.
const client = new OpenAI({ apiKey: key || 'no-key', baseURL: `${url}/v1` });

// --- a small PNG, made here so the test needs no fixture file
function crc32(buf) {
  let c = ~0;
  for (const b of buf) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
  }
  return ~c >>> 0;
}
function chunk(type, data) {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([len, body, crc]);
}
function png(width, height) {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8;  // bit depth
  ihdr[9] = 2;  // RGB
  const rows = [];
  for (let y = 0; y < height; y++) {
    const row = Buffer.alloc(1 + width * 3);
    for (let x = 0; x < width; x++) {
      row[1 + x * 3] = (x * 255) / width;
      row[2 + x * 3] = (y * 255) / height;
      row[3 + x * 3] = 128;
    }
    rows.push(row);
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(Buffer.concat(rows))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let step = 0;
async function check(name, fn) {
  step += 1;
  const t0 = Date.now();
  try {
    await fn();
  } catch (e) {
    console.error(`FAIL ${step}. ${name}: ${e.stack || e}`);
    process.exit(1);
  }
  console.log(`ok ${step}. ${name} (${Date.now() - t0} ms)`);
}

async function untilDone(id) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await client.videos.retrieve(id);
    if (['completed', 'failed', 'cancelled'].includes(v.status)) return v;
    if (Date.now() > deadline) throw new Error(`${id} still ${v.status} (${v.progress}%) after ${timeoutMs} ms`);
    await sleep(250);
  }
}

function isMp4(bytes) {
  return bytes.length > 8 && Buffer.from(bytes.subarray(4, 8)).toString('ascii') === 'ftyp';
}

function isPng(bytes) {
  const signature = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
  return bytes.length > 24 && signature.every((b, i) => bytes[i] === b);
}

let withImage;
let promptOnly;

await check('create with toFile(png) as input_reference', async () => {
  const file = await toFile(png(64, 64), 'ref.png', { type: 'image/png' });
  withImage = await client.videos.create({ prompt: 'a lighthouse at dusk, waves', input_reference: file });
  assert.equal(withImage.object, 'video');
  assert.equal(withImage.status, 'queued');
  assert.equal(withImage.progress, 0);
  assert.match(withImage.id, /^video_[0-9a-f]{32}$/);
  assert.equal(typeof withImage.created_at, 'number');
  assert.equal(typeof withImage.seconds, 'string');
  assert.match(withImage.size, /^\d+x\d+$/);
});

await check('create with the prompt alone', async () => {
  promptOnly = await client.videos.create({ prompt: 'a paper boat on a stream' });
  assert.equal(promptOnly.status, 'queued');
  assert.notEqual(promptOnly.id, withImage.id);
});

await check('retrieve until completed', async () => {
  for (const v of [withImage, promptOnly]) {
    const done = await untilDone(v.id);
    assert.equal(done.status, 'completed', JSON.stringify(done.error));
    assert.equal(done.progress, 100);
    assert.equal(typeof done.completed_at, 'number');
  }
});

await check('list with limit 1 across pages (for await)', async () => {
  const ids = [];
  for await (const v of client.videos.list({ limit: 1 })) {
    ids.push(v.id);
    if (ids.length > 1000) break;
  }
  assert.equal(new Set(ids).size, ids.length, 'a video came twice');
  // Newest first: the prompt-only job was created after the one with the image.
  const a = ids.indexOf(promptOnly.id);
  const b = ids.indexOf(withImage.id);
  assert.ok(a >= 0 && b >= 0, `both jobs listed: ${ids}`);
  assert.ok(a < b, 'newest first');
});

await check('downloadContent gives an MP4', async () => {
  const res = await client.videos.downloadContent(withImage.id);
  const bytes = new Uint8Array(await res.arrayBuffer());
  assert.ok(isMp4(bytes), `no ftyp box in ${bytes.length} bytes`);
});

await check('downloadContent with variant thumbnail gives a PNG of the video size', async () => {
  let res;
  try {
    res = await client.videos.downloadContent(withImage.id, { variant: 'thumbnail' });
  } catch (e) {
    // What a server built without image I/O answers, by design.
    if (e instanceof BadRequestError && e.code === 'unsupported_variant') {
      console.log('   (the server makes no thumbnails: built without image I/O)');
      return;
    }
    throw e;
  }
  assert.equal(res.headers.get('content-type'), 'image/png');
  const bytes = new Uint8Array(await res.arrayBuffer());
  assert.ok(isPng(bytes), `no PNG signature in ${bytes.length} bytes`);
  const ihdr = new DataView(bytes.buffer, bytes.byteOffset + 16, 8);
  assert.equal(`${ihdr.getUint32(0)}x${ihdr.getUint32(4)}`, withImage.size);
});

// The pipelines the server runs (a stand-in service for the routes may serve none of them).
const served = await (async () => {
  const res = await fetch(`${url}/v1/models`, { headers: key ? { Authorization: `Bearer ${key}` } : {} });
  const body = await res.json();
  return new Set(((body.data || [])[0] || {}).pipelines || []);
})();
function serves(pipeline) {
  if (served.has(pipeline)) return true;
  console.log(`   (the server runs no ${pipeline} pipeline: nothing to check)`);
  return false;
}

await check('create a retake with toFile(mp4) as video_path (a pipeline field beside the SDK\'s)', async () => {
  if (!serves('retake')) return;
  // The SDK sends every body member as a multipart field, files as file parts.
  const res = await client.videos.downloadContent(withImage.id);
  const clip = new Uint8Array(await res.arrayBuffer());
  const v = await client.videos.create({
    prompt: 'the lighthouse in fog',
    pipeline: 'retake',
    video_path: await toFile(clip, 'clip.mp4', { type: 'video/mp4' }),
    start_time: 0.1,
    end_time: 0.3,
  });
  assert.equal(v.status, 'queued');
  assert.equal(v.size, withImage.size, 'the retake takes the clip\'s size');
  const done = await untilDone(v.id);
  assert.equal(done.status, 'completed', JSON.stringify(done.error));
  const out = await client.videos.downloadContent(v.id);
  assert.equal(out.headers.get('content-type'), 'video/mp4');
  assert.ok(isMp4(new Uint8Array(await out.arrayBuffer())));
});

await check('a retake window past the clip is BadRequestError naming end_time', async () => {
  if (!serves('retake')) return;
  const res = await client.videos.downloadContent(withImage.id);
  const clip = new Uint8Array(await res.arrayBuffer());
  await assert.rejects(client.videos.create({
    prompt: 'x',
    pipeline: 'retake',
    video_path: await toFile(clip, 'clip.mp4', { type: 'video/mp4' }),
    start_time: 0.1,
    end_time: 30,
  }), (e) => {
    assert.ok(e instanceof BadRequestError, `${e}`);
    assert.equal(e.param, 'end_time');
    return true;
  });
});

await check('delete, then retrieve is NotFoundError', async () => {
  const d = await client.videos.delete(promptOnly.id);
  assert.deepEqual({ id: d.id, object: d.object, deleted: d.deleted },
    { id: promptOnly.id, object: 'video.deleted', deleted: true });
  await assert.rejects(client.videos.retrieve(promptOnly.id), NotFoundError);
});

await check('a wrong key is AuthenticationError', async () => {
  if (!key) {
    console.log('   (the server has no --api-key: nothing to check)');
    return;
  }
  const wrong = new OpenAI({ apiKey: `${key}-wrong`, baseURL: `${url}/v1`, maxRetries: 0 });
  await assert.rejects(wrong.videos.list({ limit: 1 }), AuthenticationError);
});

await check('content before completion is a fast ConflictError (no retries)', async () => {
  const v = await client.videos.create({ prompt: 'a slow sunrise' });
  const t0 = Date.now();
  await assert.rejects(client.videos.downloadContent(v.id), (e) => {
    assert.ok(e instanceof ConflictError, `${e}`);
    assert.ok(e.requestID, 'x-request-id becomes requestID');
    return true;
  });
  // The SDK retries a 409 twice with a backoff of at least 0.5 s unless told not to.
  assert.ok(Date.now() - t0 < 1500, `took ${Date.now() - t0} ms: the 409 was retried`);
  await client.videos.delete(v.id);
});

await check('an unknown field is UnprocessableEntityError', async () => {
  await assert.rejects(client.videos.create({ prompt: 'x', bogus_field: '1' }), (e) => {
    assert.ok(e instanceof UnprocessableEntityError, `${e}`);
    assert.match(e.message, /bogus_field/);
    return true;
  });
});

// --- the same API through plain curl
const dir = mkdtempSync(join(tmpdir(), 'ltx-curl-'));
const auth = key ? ['-H', `Authorization: Bearer ${key}`] : [];
const curl = (...args) => execFileSync('curl', ['-sS', ...auth, ...args], { encoding: 'utf8' });
const curlJson = (...args) => JSON.parse(curl(...args));
try {
  let multipartId;
  let jsonId;
  await check('curl -F (multipart with a file)', async () => {
    writeFileSync(join(dir, 'ref.png'), png(64, 64));
    const v = curlJson('-F', 'prompt=a red kite over hills', '-F',
      `input_reference=@${join(dir, 'ref.png')};type=image/png`, `${url}/v1/videos`);
    assert.equal(v.status, 'queued', JSON.stringify(v));
    multipartId = v.id;
  });
  await check('curl with a JSON body', async () => {
    const v = curlJson('-H', 'Content-Type: application/json', '-d',
      JSON.stringify({ prompt: 'a blue kite over the sea', seed: 7 }), `${url}/v1/videos`);
    assert.equal(v.status, 'queued', JSON.stringify(v));
    jsonId = v.id;
  });
  await check('curl -r 0-99 on the content gives 206 and the first 100 bytes', async () => {
    for (const id of [multipartId, jsonId]) {
      const done = await untilDone(id);
      assert.equal(done.status, 'completed', JSON.stringify(done.error));
    }
    const out = join(dir, 'head.bin');
    const headers = curl('-r', '0-99', '-o', out, '-D', '-', `${url}/v1/videos/${jsonId}/content`);
    assert.match(headers, /^HTTP\/1\.1 206/m, headers);
    assert.match(headers, /^Content-Range: bytes 0-99\/\d+/mi, headers);
    const bytes = readFileSync(out);
    assert.equal(bytes.length, 100);
    assert.ok(isMp4(bytes));
  });
  await check('curl -F pipeline=t2a gives a WAV (audio/wav)', async () => {
    if (!serves('t2a')) return;
    const v = curlJson('-F', 'prompt=rain on a tin roof', '-F', 'pipeline=t2a', '-F', 'num_frames=9',
      '-F', 'num_inference_steps=2', `${url}/v1/videos`);
    assert.equal(v.status, 'queued', JSON.stringify(v));
    const done = await untilDone(v.id);
    assert.equal(done.status, 'completed', JSON.stringify(done.error));
    assert.equal(done.output_format, 'wav');
    const out = join(dir, 'rain.wav');
    const headers = curl('-o', out, '-D', '-', `${url}/v1/videos/${v.id}/content`);
    assert.match(headers, /^Content-Type: audio\/wav/mi, headers);
    const bytes = readFileSync(out);
    assert.equal(bytes.subarray(0, 4).toString('ascii'), 'RIFF');
    assert.equal(bytes.subarray(8, 12).toString('ascii'), 'WAVE');
  });
  await check('curl gets the OpenAI error shape for a bad id', async () => {
    const body = curlJson(`${url}/v1/videos/video_nope`);
    assert.equal(body.error.type, 'invalid_request_error');
    assert.equal(typeof body.error.message, 'string');
  });
} finally {
  rmSync(dir, { recursive: true, force: true });
}

console.log(`sdk_test: all ${step} checks passed`);
