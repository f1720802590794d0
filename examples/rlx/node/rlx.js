// An RLX client for Node.js: one environment's connection to a robot served by `parl serve`.
//
//   const { RlxClient } = require("./rlx");
//   const client = await RlxClient.connect("127.0.0.1:7070", { token });  // hello, welcome
//   let action = await client.init(obs);                  // starts an episode
//   action = await client.send(reward, obs);              // the reward of the last action, the next action
//   const episodeReturn = await client.reset(reward);     // ends it (terminated; { truncated: true, obs } for a time limit)
//   client.metrics("battery", 0.8);                       // a scalar in the server's metrics, no answer
//   await client.disconnect();                            // bye
//
// The protocol is docs/rlx.md: each frame is a 4-byte big-endian length and one msgpack map;
// observations travel as {dtype: "float32", shape: [n], data: <little-endian bytes>}. An `error`
// from the server rejects the pending request with an RlxError carrying its code ("busy",
// "unauthorized", "timeout", "shutdown", ...), and the connection is closed.
"use strict";

const net = require("node:net");
const { encode, decode } = require("@msgpack/msgpack");

const VERSION = 1;
const MAX_FRAME_BYTES = 1 << 20;

class RlxError extends Error {
  constructor(code, message) {
    super(`server error ${code}: ${message}`);
    this.code = code;
    this.serverMessage = message;
  }
}

/** A Float32Array (or an array of numbers) as an RLX array map of float32, little-endian. */
function float32Array(values) {
  const data = new Uint8Array(4 * values.length);
  const view = new DataView(data.buffer);
  for (let i = 0; i < values.length; i++) view.setFloat32(4 * i, values[i], true);
  return { dtype: "float32", shape: [values.length], data };
}

/** One frame: the body's length (big-endian uint32), then the msgpack body. */
function frame(message) {
  const body = encode(message);
  const out = Buffer.allocUnsafe(4 + body.length);
  out.writeUInt32BE(body.length, 0);
  Buffer.from(body.buffer, body.byteOffset, body.length).copy(out, 4);
  return out;
}

function splitAddress(address) {
  const at = address.lastIndexOf(":");
  if (at <= 0) throw new Error(`expected an address host:port, got ${address}`);
  return { host: address.slice(0, at).replace(/^\[|\]$/g, ""), port: Number(address.slice(at + 1)) };
}

class RlxClient {
  constructor(socket) {
    this.socket = socket;
    this.buffer = Buffer.alloc(0);
    this.waiting = []; // resolve/reject of requests in order
    this.closed = false;
    this.weightsVersion = 0;
    this.episodeLength = 0;
    socket.setNoDelay(true);
    socket.on("data", (chunk) => this._receive(chunk));
    socket.on("close", () => this._fail(new Error("the server closed the connection")));
    socket.on("error", (err) => this._fail(err));
  }

  /** Connects and says hello; resolves with the client once the server's welcome has come. */
  static connect(address, { token = null, name = "parl-node" } = {}) {
    const { host, port } = splitAddress(address);
    return new Promise((resolve, reject) => {
      const socket = net.createConnection({ host, port }, async () => {
        socket.removeListener("error", reject);
        const client = new RlxClient(socket);
        const hello = { type: "hello", version: VERSION, client: name };
        if (token !== null) hello.token = token;
        try {
          const welcome = await client._request(hello, "welcome");
          client.observationSpace = welcome.observation_space;
          client.actionSpace = welcome.action_space;
          client.limits = welcome.limits;
          client.envSteps = welcome.env_steps;
          client.slot = welcome.slot;
          resolve(client);
        } catch (err) {
          reject(err);
        }
      });
      socket.once("error", reject);
    });
  }

  /** Starts an episode at `obs` (an array of numbers); resolves with its first action. */
  async init(obs) {
    return this._act({ type: "init", obs: float32Array(obs) });
  }

  /** The reward of the last action and the observation it led to; resolves with the next action. */
  async send(reward, obs) {
    return this._act({ type: "step", reward, obs: float32Array(obs) });
  }

  /**
   * Ends the episode with the reward of the last action; resolves with its return. `truncated`: cut by
   * a time limit (then give `obs`, the last observation, to bootstrap from); terminated otherwise.
   */
  async reset(reward, { truncated = false, obs = null } = {}) {
    const message = { type: "reset", reward, truncated };
    if (obs !== null) message.obs = float32Array(obs);
    const done = await this._request(message, "done");
    this.episodeLength = done.length;
    return done.return;
  }

  /** A scalar for the server's metrics (client/<name>); sent without waiting. */
  metrics(name, value, step = null) {
    const message = { type: "metrics", name, value };
    if (step !== null) message.step = step;
    this.socket.write(frame(message));
  }

  /** Says bye and closes. */
  async disconnect() {
    if (this.closed) return;
    this.closed = true;
    await new Promise((resolve) => this.socket.end(frame({ type: "bye" }), resolve));
  }

  async _act(message) {
    const reply = await this._request(message, "action");
    this.weightsVersion = reply.weights_version;
    return reply.action;
  }

  _request(message, expected) {
    if (this.closed) return Promise.reject(new Error("the connection is closed"));
    const body = frame(message);
    if (body.length - 4 > MAX_FRAME_BYTES) return Promise.reject(new Error("message too large"));
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject, expected });
      this.socket.write(body);
    });
  }

  _receive(chunk) {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
    while (this.buffer.length >= 4) {
      const size = this.buffer.readUInt32BE(0);
      if (size === 0 || size > MAX_FRAME_BYTES) return this._fail(new Error(`a frame of ${size} bytes`));
      if (this.buffer.length < 4 + size) return;
      const message = decode(this.buffer.subarray(4, 4 + size));
      this.buffer = this.buffer.subarray(4 + size);
      const request = this.waiting.shift();
      if (message.type === "error") {
        const error = new RlxError(message.code, message.message);
        this.closed = true;
        this.socket.destroy();
        if (request) request.reject(error);
        this._fail(error);
        return;
      }
      if (!request) return this._fail(new Error(`an unexpected ${message.type} from the server`));
      if (message.type !== request.expected) {
        request.reject(new Error(`expected ${request.expected} from the server, got ${message.type}`));
      } else {
        request.resolve(message);
      }
    }
  }

  _fail(error) {
    this.closed = true;
    for (const request of this.waiting.splice(0)) request.reject(error);
  }
}

module.exports = { RlxClient, RlxError, float32Array, frame, VERSION };
