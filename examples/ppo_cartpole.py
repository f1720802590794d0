"""PPO on CartPole-v1 with agents as threads feeding one ComputationTask, synchronously.

    python examples/ppo_cartpole.py [--seed 0] [--agents 8] [--placement threads] [--max-steps 200000]
    python examples/ppo_cartpole.py --agents 16 -o tasks.RL.algorithm.learning_rate=1e-3

Every agent sends its last 32 transitions (fewer when its episode ends) and
waits; the task updates once all agents' segments are in, as in synchronous
PPO (the batching sizes are the config's agent count, so ``--agents`` changes
them too). Trains until a greedy 10-episode evaluation reaches the target mean
return, confirmed on 50 more episodes (or the env step budget runs out), then
prints a greedy 50-episode evaluation on fresh seeds. The robot is
examples/configs/ppo_cartpole.yaml; ``-o KEY.PATH=VALUE`` changes any of its values.
"""

from parl.experiment.train.launch import example_config, launch

if __name__ == "__main__":
    launch(example_config(__file__), description=__doc__)
