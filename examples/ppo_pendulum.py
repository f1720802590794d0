"""PPO on Pendulum-v1: continuous actions from a Gaussian policy, the algorithm of ppo_cartpole.py.

    python examples/ppo_pendulum.py [--seed 0] [--agents 4] [--placement threads] [--max-steps 300000]

The policy acts in [-1, 1] (scaled to the torque bounds by the agent);
observations are normalized by running statistics and rewards scaled by 0.1
in the task, not in the algorithm. Every Pendulum episode is cut at 200 steps
(a truncation, so PPO bootstraps there); each agent's segment is its episode,
and the task updates once every agent's is in. Trains until a greedy 10-episode
evaluation reaches the target mean return, then prints a greedy 50-episode
evaluation on fresh seeds. The robot is examples/configs/ppo_pendulum.yaml.
"""

from parl.experiment.train.launch import example_config, launch

if __name__ == "__main__":
    launch(example_config(__file__), description=__doc__)
