// The page of `ltx serve` in headless Chromium (Debian's /usr/bin/chromium, driven by
// puppeteer-core): submit a job, watch its progress reach 100 through the event stream, play the
// video, see it completed in the list, keep a screenshot. Run through run_js.sh, which sets:
//   LTX_SERVE_URL        the server, e.g. http://127.0.0.1:8000
//   LTX_SERVE_API_KEY    its --api-key, or empty (the page then asks for no key)
//   LTX_WEB_SCREENSHOT   where the screenshot goes (build/test-artifacts/web_page.png)
//   LTX_CHROMIUM         the browser (default /usr/bin/chromium)
//   LTX_JS_TIMEOUT_S     how long the job may take (default 300)
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

import puppeteer from 'puppeteer-core';

const url = process.env.LTX_SERVE_URL;
if (!url) throw new Error('LTX_SERVE_URL is not set: run this through run_js.sh');
const key = process.env.LTX_SERVE_API_KEY || '';
const screenshot = process.env.LTX_WEB_SCREENSHOT || 'build/test-artifacts/web_page.png';
const timeout = Number(process.env.LTX_JS_TIMEOUT_S || 300) * 1000;

const browser = await puppeteer.launch({
  executablePath: process.env.LTX_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless=new', '--no-sandbox', '--autoplay-policy=no-user-gesture-required'],
});

let step = 0;
async function check(name, fn) {
  step += 1;
  const t0 = Date.now();
  try {
    await fn();
  } catch (e) {
    console.error(`FAIL ${step}. ${name}: ${e.stack || e}`);
    await page.screenshot({ path: screenshot, fullPage: true }).catch(() => {});
    await browser.close();
    process.exit(1);
  }
  console.log(`ok ${step}. ${name} (${Date.now() - t0} ms)`);
}

const page = await browser.newPage();
await page.setViewport({ width: 1100, height: 900 });
// Anything the page's policy blocks, or a script error, fails the test.
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
page.on('console', (m) => {
  if (m.type() === 'error' && /Content Security Policy|Refused to/.test(m.text())) problems.push(m.text());
});
mkdirSync(dirname(screenshot), { recursive: true });

await check('the browser plays H.264 MP4', async () => {
  await page.goto(`${url}/`, { waitUntil: 'load' });
  const answer = await page.evaluate(() =>
    document.createElement('video').canPlayType('video/mp4; codecs="avc1.42E01E"'));
  assert.equal(answer, 'probably', `canPlayType said "${answer}": this Chromium cannot play the server's MP4`);
});

await check(key ? 'the page asks for the key, and takes it' : 'the page loads the models', async () => {
  if (key) {
    await page.waitForSelector('#key-section:not([hidden])', { timeout: 10000 });
    await page.type('#api-key', key);
    await page.click('#key-form button[type=submit]');
    await page.waitForSelector('#key-section[hidden]', { timeout: 10000 });
  }
  await page.waitForFunction(() => document.querySelectorAll('#size option').length > 0, { timeout: 10000 });
});

let id;
await check('submit a job', async () => {
  // Every progress value the page shows, to see it rise through the stream.
  await page.evaluate(() => {
    window.seenProgress = [];
    const bar = document.getElementById('progress');
    new MutationObserver(() => window.seenProgress.push(Number(bar.value)))
      .observe(document.getElementById('progress-text'), { childList: true, characterData: true, subtree: true });
  });
  await page.type('#prompt', 'a lighthouse at dusk, waves rolling in');
  await page.click('#submit');
  await page.waitForFunction(() => /^video_[0-9a-f]{32}$/.test(document.getElementById('current-title').textContent),
    { timeout: 30000 });
  id = await page.$eval('#current-title', (e) => e.textContent);
  const error = await page.$eval('#form-error', (e) => e.textContent);
  assert.equal(error, '');
});

await check('progress reaches 100 through the event stream', async () => {
  await page.waitForFunction(() => document.getElementById('progress').value === 100 ||
    ['failed', 'cancelled'].includes(document.getElementById('current-status').dataset.status), { timeout });
  const status = await page.$eval('#current-status', (e) => e.dataset.status);
  const error = await page.$eval('#current-error', (e) => e.textContent);
  assert.equal(status, 'completed', error);
  const seen = await page.evaluate(() => window.seenProgress);
  assert.equal(seen.at(-1), 100);
  for (let i = 1; i < seen.length; i++) assert.ok(seen[i] >= seen[i - 1], `progress went back: ${seen}`);
});

await check('the <video> loads (readyState >= 2, duration > 0)', async () => {
  await page.waitForFunction(() => {
    const v = document.getElementById('player');
    return !v.hidden && v.readyState >= 2 && v.duration > 0;
  }, { timeout: 30000 });
  const media = await page.$eval('#player', (v) => ({ duration: v.duration, w: v.videoWidth, h: v.videoHeight, error: v.error && v.error.message }));
  assert.ok(media.duration > 0 && media.w > 0 && media.h > 0, JSON.stringify(media));
});

await check('the player\'s poster is the thumbnail (a PNG)', async () => {
  const poster = await page.$eval('#player', (v) => v.poster);
  assert.match(poster, /[?&]variant=thumbnail(&|$)/);
  const got = await page.evaluate(async (url) => {
    const res = await fetch(url);
    const bytes = new Uint8Array(await res.arrayBuffer());
    return { status: res.status, type: res.headers.get('content-type'), signature: Array.from(bytes.subarray(0, 4)) };
  }, poster);
  // A server built without image I/O makes none and says so (400); the page shows no poster then.
  if (got.status === 400) return;
  assert.deepEqual(got, { status: 200, type: 'image/png', signature: [0x89, 0x50, 0x4e, 0x47] });
});

await check('the list shows the job completed', async () => {
  await page.waitForFunction((jobId) => {
    const row = document.querySelector(`#jobs tbody tr[data-id="${jobId}"]`);
    return row && row.dataset.status === 'completed';
  }, { timeout: 10000 }, id);
});

// A job of another pipeline from the form: its fields appear when it is chosen, and the page
// shows what its download holds.
async function submitAndWaitCompleted() {
  const before = await page.$eval('#current-title', (e) => e.textContent);
  await page.click('#submit');
  await page.waitForFunction((prev) => {
    const t = document.getElementById('current-title').textContent;
    return /^video_[0-9a-f]{32}$/.test(t) && t !== prev;
  }, { timeout: 30000 }, before);
  const error = await page.$eval('#form-error', (e) => e.textContent);
  assert.equal(error, '');
  await page.waitForFunction(() => ['completed', 'failed', 'cancelled']
    .includes(document.getElementById('current-status').dataset.status), { timeout });
  const status = await page.$eval('#current-status', (e) => e.dataset.status);
  assert.equal(status, 'completed', await page.$eval('#current-error', (e) => e.textContent));
}

// Whether the page offers the pipeline (a stand-in service for the routes may serve none).
async function offers(pipeline) {
  const names = await page.$$eval('#pipeline option', (options) => options.map((o) => o.value));
  if (names.includes(pipeline)) return true;
  console.log(`   (the server runs no ${pipeline} pipeline: nothing to check)`);
  return false;
}

// The first job's MP4 in `dir`, for the forms that upload a clip.
async function firstJobClip(dir) {
  const res = await fetch(`${url}/v1/videos/${id}/content`, {
    headers: key ? { Authorization: `Bearer ${key}` } : {},
  });
  assert.equal(res.status, 200);
  const clip = join(dir, 'clip.mp4');
  writeFileSync(clip, Buffer.from(await res.arrayBuffer()));
  return clip;
}

let firstPipeline = '';
await check('retake from the form: the clip uploaded in its video_path field plays', async () => {
  firstPipeline = await page.$eval('#pipeline', (s) => s.value);
  if (!(await offers('retake'))) return;
  const dir = mkdtempSync(join(tmpdir(), 'ltx-web-'));
  try {
    const clip = await firstJobClip(dir);
    await page.select('#pipeline', 'retake');
    assert.equal(await page.$eval('#size-label', (e) => e.hidden), true, 'retake takes the clip\'s size');
    const upload = await page.waitForSelector('#pipeline-fields input[name="video_path"]', { timeout: 5000 });
    await upload.uploadFile(clip);
    await page.type('#pipeline-fields input[name="start_time"]', '0.1');
    await page.type('#pipeline-fields input[name="end_time"]', '0.3');
    await submitAndWaitCompleted();
    await page.waitForFunction(() => {
      const v = document.getElementById('player');
      return !v.hidden && v.readyState >= 2 && v.duration > 0;
    }, { timeout: 30000 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

await check('t2a from the form: the WAV plays in an <audio>', async () => {
  if (!(await offers('t2a'))) return;
  await page.select('#pipeline', 't2a');
  assert.equal(await page.$eval('#size-label', (e) => e.hidden), true, 't2a takes no size');
  assert.equal(await page.$$eval('#pipeline-fields input', (l) => l.length), 0);
  await submitAndWaitCompleted();
  await page.waitForFunction(() => {
    const a = document.getElementById('audio-player');
    return !a.hidden && a.readyState >= 1 && a.duration > 0;
  }, { timeout: 30000 });
  assert.equal(await page.$eval('#player', (v) => v.hidden), true);
  await page.select('#pipeline', firstPipeline);
});

await check('hdr-ic-lora from the form: its thumbnail shows beside a link to the tar', async () => {
  if (!(await offers('hdr-ic-lora'))) return;
  const dir = mkdtempSync(join(tmpdir(), 'ltx-web-'));
  try {
    const clip = await firstJobClip(dir);
    await page.select('#pipeline', 'hdr-ic-lora');
    assert.equal(await page.$eval('#size-label', (e) => e.hidden), true, 'hdr-ic-lora takes the clip\'s size');
    const upload = await page.waitForSelector('#pipeline-fields input[name="video_conditioning[video]"]',
      { timeout: 5000 });
    await upload.uploadFile(clip);
    await page.click('#pipeline-fields input[name="skip_mp4"]');
    await submitAndWaitCompleted();
    await page.waitForFunction(() => {
      const img = document.getElementById('image-player');
      return !img.hidden && img.complete && img.naturalWidth > 0 && !document.getElementById('download-link').hidden;
    }, { timeout: 30000 });
    assert.equal(await page.$eval('#player', (v) => v.hidden), true);
    const tar = await fetch(await page.$eval('#download-link', (a) => a.href));
    assert.equal(tar.status, 200);
    assert.equal(tar.headers.get('content-type'), 'application/x-tar');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  await page.select('#pipeline', firstPipeline);
});

await check('an HDR master from the form: its thumbnail shows beside a link to the tar', async () => {
  if (!(await offers('distilled'))) return;
  await page.select('#pipeline', 'distilled');
  assert.equal(await page.$eval('#hdr-label', (e) => e.hidden), false, 'distilled takes hdr');
  await page.select('#hdr', 'ACESCG');
  await submitAndWaitCompleted();
  await page.waitForFunction(() => {
    const img = document.getElementById('image-player');
    return !img.hidden && img.complete && img.naturalWidth > 0 && !document.getElementById('download-link').hidden;
  }, { timeout: 30000 });
  const tar = await fetch(await page.$eval('#download-link', (a) => a.href));
  assert.equal(tar.status, 200);
  assert.equal(tar.headers.get('content-type'), 'application/x-tar');
  await page.select('#hdr', '');
  if (await offers('t2a')) {
    await page.select('#pipeline', 't2a');
    assert.equal(await page.$eval('#hdr-label', (e) => e.hidden), true, 't2a takes no hdr');
  }
  await page.select('#pipeline', firstPipeline);
});

await check('the page broke no policy and threw nothing', async () => {
  assert.deepEqual(problems, []);
});

await check('screenshot', async () => {
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(`   ${screenshot}`);
});

await browser.close();
console.log(`web_test: all ${step} checks passed`);
