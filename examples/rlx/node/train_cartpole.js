// CartPole in JavaScript, trained by a parl robot over RLX: `connections` environments play at once,
// each on a connection of its own, until the server stops (its target return, its step budget, Ctrl-C).
//
//   parl serve examples/configs/ppo_cartpole.yaml --max-clients 4
//   node examples/rlx/node/train_cartpole.js --address 127.0.0.1:7070 --connections 4 --seed 0
//
// Prints one JSON line at the end: episodes, steps, the mean return of the last 20 episodes.
"use strict";

const fs = require("node:fs");
const { RlxClient, RlxError } = require("./rlx");
const { CartPole } = require("./cartpole");

function options(argv) {
  const out = { address: "127.0.0.1:7070", connections: 1, seed: 0, tokenFile: null, episodes: Infinity, wait: 30 };
  for (let i = 0; i < argv.length; i += 2) {
    const [key, value] = [argv[i], argv[i + 1]];
    if (key === "--address") out.address = value;
    else if (key === "--connections") out.connections = Number(value);
    else if (key === "--seed") out.seed = Number(value);
    else if (key === "--token-file") out.tokenFile = value;
    else if (key === "--episodes") out.episodes = Number(value);
    else if (key === "--wait") out.wait = Number(value);
    else throw new Error(`unknown option ${key}; options: --address --connections --seed --token-file --episodes --wait`);
  }
  return out;
}

/** A client of the server, retrying while it does not listen yet or is busy. */
async function connect(address, token, waitSeconds) {
  const deadline = Date.now() + 1000 * waitSeconds;
  for (;;) {
    try {
      return await RlxClient.connect(address, { token });
    } catch (err) {
      const retry = err.code === "ECONNREFUSED" || (err instanceof RlxError && err.code === "busy");
      if (!retry || Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

/** Episodes of one environment until `episodes` or the server's shutdown; their returns. */
async function play(address, token, seed, episodes, waitSeconds) {
  const client = await connect(address, token, waitSeconds);
  const env = new CartPole(seed);
  const returns = [];
  try {
    while (returns.length < episodes) {
      let action = await client.init(env.reset());
      for (;;) {
        const { obs, reward, terminated, truncated } = env.step(action);
        if (terminated || truncated) {
          returns.push(await client.reset(reward, { truncated, obs }));
          break;
        }
        action = await client.send(reward, obs);
      }
    }
    await client.disconnect();
  } catch (err) {
    if (!(err instanceof RlxError && err.code === "shutdown")) throw err;
  }
  return returns;
}

async function main() {
  const opts = options(process.argv.slice(2));
  const token = opts.tokenFile ? fs.readFileSync(opts.tokenFile, "utf8").trim() : null;
  const runs = [];
  for (let i = 0; i < opts.connections; i++) {
    runs.push(play(opts.address, token, opts.seed * 1000 + i, opts.episodes, opts.wait));
  }
  const returns = (await Promise.all(runs)).flat();
  const last = returns.slice(-20);
  const mean = last.length ? last.reduce((a, b) => a + b, 0) / last.length : null;
  const steps = returns.reduce((a, b) => a + b, 0);
  console.log(JSON.stringify({ episodes: returns.length, steps, last_20_mean_return: mean }));
}

main().catch((err) => {
  console.error(`train_cartpole: ${err.message}`);
  process.exit(1);
});
