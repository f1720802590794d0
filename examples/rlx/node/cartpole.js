// CartPole-v1 in JavaScript: gymnasium's classic-control CartPole (Barto, Sutton and Anderson's cart and
// pole), the same constants, Euler integration, termination bounds, reward and 500-step time limit, so a
// policy learned here balances gymnasium's pole too. Observations are [x, x_dot, theta, theta_dot].
"use strict";

const GRAVITY = 9.8;
const MASS_CART = 1.0;
const MASS_POLE = 0.1;
const TOTAL_MASS = MASS_CART + MASS_POLE;
const HALF_LENGTH = 0.5;
const POLE_MASS_LENGTH = MASS_POLE * HALF_LENGTH;
const FORCE = 10.0;
const TAU = 0.02;
const THETA_LIMIT = (12 * 2 * Math.PI) / 360;
const X_LIMIT = 2.4;
const MAX_STEPS = 500;

/** A small seeded generator (mulberry32), so that an episode's start can be replayed. */
function generator(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class CartPole {
  constructor(seed = 0) {
    this.random = generator(seed);
    this.state = null;
    this.steps = 0;
  }

  /** A new episode: each state variable uniform in [-0.05, 0.05]; returns the observation. */
  reset() {
    this.state = [0, 0, 0, 0].map(() => this.random() * 0.1 - 0.05);
    this.steps = 0;
    return Float32Array.from(this.state);
  }

  /** Push left (0) or right (1) for one step: { obs, reward, terminated, truncated }. */
  step(action) {
    let [x, xDot, theta, thetaDot] = this.state;
    const force = action === 1 ? FORCE : -FORCE;
    const cos = Math.cos(theta);
    const sin = Math.sin(theta);
    const temp = (force + POLE_MASS_LENGTH * thetaDot * thetaDot * sin) / TOTAL_MASS;
    const thetaAcc = (GRAVITY * sin - cos * temp) / (HALF_LENGTH * (4.0 / 3.0 - (MASS_POLE * cos * cos) / TOTAL_MASS));
    const xAcc = temp - (POLE_MASS_LENGTH * thetaAcc * cos) / TOTAL_MASS;
    x += TAU * xDot;
    xDot += TAU * xAcc;
    theta += TAU * thetaDot;
    thetaDot += TAU * thetaAcc;
    this.state = [x, xDot, theta, thetaDot];
    this.steps += 1;
    const terminated = x < -X_LIMIT || x > X_LIMIT || theta < -THETA_LIMIT || theta > THETA_LIMIT;
    const truncated = !terminated && this.steps >= MAX_STEPS;
    return { obs: Float32Array.from(this.state), reward: 1.0, terminated, truncated };
  }
}

module.exports = { CartPole };
