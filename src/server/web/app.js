// The page of `ltx serve`: a form that creates a video (multipart, as the OpenAI SDKs send it),
// live progress from the job's event stream, the result in a <video>, <audio> (t2a's WAV) or <img>
// (one frame's PNG; hdr-ic-lora's thumbnail beside a link to its tar) element, and the job list. The form's pipeline fields (uploads for retake,
// a2vid, ic-lora, ...) come from GET /v1/models.
// Vanilla JS, no dependencies; the page's policy (default-src 'self') allows nothing else.
// Server text only ever goes into the page through textContent.

const $ = (id) => document.getElementById(id);
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const KEY_STORAGE = 'ltx-serve-api-key';

let apiKey = sessionStorage.getItem(KEY_STORAGE) || '';
let stream = null;  // the EventSource of the job shown under "current"

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(path, options = {}) {
  const headers = new Headers(options.headers || {});
  if (apiKey) headers.set('Authorization', `Bearer ${apiKey}`);
  const res = await fetch(path, { ...options, headers });
  const type = res.headers.get('Content-Type') || '';
  const body = type.startsWith('application/json') ? await res.json() : await res.text();
  if (!res.ok) {
    const message = body && body.error ? body.error.message : `HTTP ${res.status}`;
    throw new HttpError(res.status, message);
  }
  return body;
}

function askForKey(message) {
  $('key-section').hidden = false;
  $('key-error').textContent = message || '';
  $('api-key').focus();
}

// Sizes the model offers: its default first, then common ones within its limits.
function sizeChoices(model) {
  const defaults = model.defaults || {};
  const limits = model.limits || {};
  const maxW = limits.max_width || limits.width || 4096;
  const maxH = limits.max_height || limits.height || 4096;
  const first = defaults.size || (defaults.width && defaults.height ? `${defaults.width}x${defaults.height}` : null);
  const common = ['64x64', '128x128', '256x256', '512x512', '768x512', '512x768', '1024x576', '576x1024', '1280x704', '704x1280'];
  const fits = (s) => {
    const [w, h] = s.split('x').map(Number);
    return w <= maxW && h <= maxH;
  };
  const all = [first, ...common].filter((s) => s && fits(s));
  return [...new Set(all)];
}

async function loadModels() {
  const models = await api('/v1/models');
  const model = (models.data || [])[0] || {};
  $('model').textContent = model.id ? `model ${model.id}${model.demo ? ' (demo)' : ''}` : '';
  const select = $('size');
  select.replaceChildren();
  for (const s of sizeChoices(model)) {
    const opt = document.createElement('option');
    opt.value = s;
    opt.textContent = s;
    select.append(opt);
  }
  const defaults = model.defaults || {};
  if (defaults.seconds) $('seconds').value = String(defaults.seconds);
  served = model;
  const pipeline = $('pipeline');
  pipeline.replaceChildren();
  for (const name of model.pipelines || []) {
    const opt = document.createElement('option');
    opt.value = name;
    opt.textContent = name;
    pipeline.append(opt);
  }
  if (model.default_pipeline) pipeline.value = model.default_pipeline;
  showPipelineFields();
}

let served = {};  // the model of GET /v1/models

// One input per field of the chosen pipeline, named as the API names it (a form part each).
function fieldInputs(name, field) {
  const inputs = [];
  const file = (partName, accept) => {
    const input = document.createElement('input');
    input.type = 'file';
    input.name = partName;
    input.accept = accept;
    input.required = field.required;
    return input;
  };
  const number = (partName, placeholder) => {
    const input = document.createElement('input');
    input.type = 'number';
    input.step = 'any';
    input.name = partName;
    input.placeholder = placeholder;
    return input;
  };
  if (field.type === 'video file') inputs.push(file(name, 'video/*'));
  else if (field.type === 'audio file') inputs.push(file(name, 'audio/*,video/*'));
  else if (field.type === 'safetensors file') inputs.push(file(name, '.safetensors'));
  else if (field.type === 'number') inputs.push(number(name, field.required ? 'required' : 'default'));
  else if (field.type === 'boolean') {
    const input = document.createElement('input');
    input.type = 'checkbox';
    input.name = name;
    input.value = 'true';
    inputs.push(input);
  } else if (field.type.startsWith('[')) {  // a list of {video, strength}: one here
    inputs.push(file(`${name}[][video]`, 'video/*'), number(`${name}[][strength]`, 'strength 1'));
  } else {  // {video, strength}
    const video = file(`${name}[video]`, 'video/*');
    inputs.push(video, number(`${name}[strength]`, 'strength 1'));
  }
  return inputs;
}

function pipelineDefaults() {
  return (served.defaults || {})[$('pipeline').value] || {};
}

function showPipelineFields() {
  const d = pipelineDefaults();
  $('size-label').hidden = d.takes_size === false;
  $('seconds-label').hidden = d.takes_duration === false;
  $('image-label').hidden = d.takes_size === false;
  $('hdr-label').hidden = d.takes_hdr !== true;
  const box = $('pipeline-fields');
  box.replaceChildren();
  for (const field of d.fields || []) {
    const label = document.createElement('label');
    label.title = field.description || '';
    label.append(`${field.name}${field.required ? '' : ' (optional)'} `, ...fieldInputs(field.name, field));
    box.append(label);
  }
}

function statusCell(td, status) {
  td.textContent = status;
  td.dataset.status = status;
}

function rowFor(video) {
  let tr = document.querySelector(`#jobs tbody tr[data-id="${video.id}"]`);
  if (!tr) {
    tr = document.createElement('tr');
    tr.dataset.id = video.id;
    for (let i = 0; i < 6; i++) tr.append(document.createElement('td'));
    tr.cells[1].className = 'prompt';
    tr.addEventListener('click', () => show(tr.video));
  }
  tr.video = video;
  tr.dataset.status = video.status;
  tr.cells[0].textContent = video.id;
  tr.cells[1].textContent = video.prompt || '';
  tr.cells[1].title = video.prompt || '';
  tr.cells[2].textContent = video.size || '';
  tr.cells[3].textContent = video.seconds || '';
  statusCell(tr.cells[4], video.status);
  tr.cells[5].textContent = `${video.progress ?? 0}%`;
  return tr;
}

async function refreshList() {
  const page = await api('/v1/videos?limit=50');
  const body = $('jobs').tBodies[0];
  body.replaceChildren(...page.data.map(rowFor));
}

function updateRow(video) {
  const body = $('jobs').tBodies[0];
  const tr = rowFor(video);
  if (!tr.parentNode) body.prepend(tr);
}

function render(video) {
  $('current').hidden = false;
  $('current-title').textContent = video.id;
  const progress = Math.max(0, Math.min(100, Number(video.progress) || 0));
  $('progress').value = progress;
  $('progress-text').textContent = `${progress}%`;
  const status = $('current-status');
  status.textContent = video.status;
  status.dataset.status = video.status;
  $('current-error').textContent = video.error ? `${video.error.code}: ${video.error.message}` : '';
  const player = $('player');
  const audio = $('audio-player');
  const image = $('image-player');
  const link = $('download-link');
  const done = video.status === 'completed' && video.download_url;
  // What the download holds: an MP4 (<video>), t2a's WAV (<audio>), one frame's PNG (<img>), or
  // a tar (hdr-ic-lora's EXR frames and preview, an hdr job's HLG master and EXR frames: its
  // thumbnail in the <img>, and a link).
  const format = done ? video.output_format || 'mp4' : '';
  if (format === 'exr') {
    link.href = video.download_url;
    link.download = `${video.id}.tar`;
    link.hidden = false;
  } else {
    link.hidden = true;
    link.removeAttribute('href');
  }
  if (format === 'mp4') {
    if (player.dataset.id !== video.id) {
      player.dataset.id = video.id;
      // The thumbnail (the middle frame) shows until the video plays; a job without one shows none.
      player.poster = `${video.download_url}&variant=thumbnail`;
      player.src = video.download_url;
    }
    player.hidden = false;
  } else {
    player.hidden = true;
    player.removeAttribute('src');
    player.removeAttribute('poster');
    delete player.dataset.id;
  }
  const thumbnail = `${video.download_url}&variant=thumbnail`;
  const sources = [
    [audio, format === 'wav' ? video.download_url : ''],
    [image, format === 'png' ? video.download_url : format === 'exr' ? thumbnail : ''],
  ];
  for (const [element, src] of sources) {
    if (src) {
      if (element.dataset.id !== video.id) {
        element.dataset.id = video.id;
        element.src = src;
      }
      element.hidden = false;
    } else {
      element.hidden = true;
      element.removeAttribute('src');
      delete element.dataset.id;
    }
  }
}

// The stream of a job's state: its snapshot, one event per change, a terminal event, then close.
// EventSource sends no headers, so with a key the job's own token (in events_url) stands in.
function follow(video) {
  if (stream) stream.close();
  stream = null;
  render(video);
  if (TERMINAL.has(video.status)) return;
  const url = video.events_url || `/v1/videos/${video.id}/events`;
  const es = new EventSource(url);
  stream = es;
  const onVideo = (ev) => {
    const v = JSON.parse(ev.data);
    if (stream === es) render(v);
    updateRow(v);
    if (TERMINAL.has(v.status)) {
      es.close();
      refreshList().catch(() => {});
    }
  };
  for (const name of ['video.updated', 'video.completed', 'video.failed', 'video.cancelled']) {
    es.addEventListener(name, onVideo);
  }
  es.addEventListener('video.deleted', () => es.close());
  es.addEventListener('server.shutdown', () => {
    es.close();
    $('current-error').textContent = 'The server is stopping; reload the page when it is back.';
  });
}

function show(video) {
  follow(video);
}

async function submit(event) {
  event.preventDefault();
  $('form-error').textContent = '';
  const form = new FormData();
  const d = pipelineDefaults();
  form.append('prompt', $('prompt').value);
  if ($('pipeline').value) form.append('pipeline', $('pipeline').value);
  if ($('size').value && d.takes_size !== false) form.append('size', $('size').value);
  if ($('seconds').value && d.takes_duration !== false) form.append('seconds', $('seconds').value);
  if ($('seed').value) form.append('seed', $('seed').value);
  if ($('hdr').value && d.takes_hdr === true) form.append('hdr', $('hdr').value);
  const image = $('image').files[0];
  if (image && d.takes_size !== false) form.append('input_reference', image, image.name);
  for (const input of $('pipeline-fields').querySelectorAll('input')) {
    if (input.type === 'file') {
      if (input.files[0]) form.append(input.name, input.files[0], input.files[0].name);
    } else if (input.type === 'checkbox') {
      if (input.checked) form.append(input.name, 'true');
    } else if (input.value !== '') {
      form.append(input.name, input.value);
    }
  }
  const button = $('submit');
  button.disabled = true;
  try {
    const video = await api('/v1/videos', { method: 'POST', body: form });
    updateRow(video);
    follow(video);
  } catch (e) {
    if (e.status === 401) askForKey(e.message);
    $('form-error').textContent = e.message;
  } finally {
    button.disabled = false;
  }
}

async function start() {
  try {
    await loadModels();
    $('key-section').hidden = true;
    await refreshList();
  } catch (e) {
    if (e.status === 401) {
      askForKey(apiKey ? 'That key was not accepted.' : '');
      return;
    }
    $('form-error').textContent = `Cannot reach the server: ${e.message}`;
  }
}

$('key-form').addEventListener('submit', (event) => {
  event.preventDefault();
  apiKey = $('api-key').value.trim();
  sessionStorage.setItem(KEY_STORAGE, apiKey);
  start();
});
$('create-form').addEventListener('submit', submit);
$('pipeline').addEventListener('change', showPipelineFields);
$('refresh').addEventListener('click', () => refreshList().catch((e) => {
  $('form-error').textContent = e.message;
}));
start();
