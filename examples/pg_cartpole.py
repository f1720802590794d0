"""REINFORCE with a learned baseline on CartPole-v1, agents as threads feeding one ComputationTask.

    python examples/pg_cartpole.py [--seed 0] [--agents 8] [--placement threads] [--max-steps 200000]

Each agent sends every episode whole (Monte-Carlo returns); the wrapper joins
the episodes that arrive together into one update. Trains until a greedy
10-episode evaluation reaches the target mean return (or the env step budget
runs out), then prints a greedy 50-episode evaluation on fresh seeds. The robot
is examples/configs/pg_cartpole.yaml.
"""

from parl.experiment.train.launch import example_config, launch

if __name__ == "__main__":
    launch(example_config(__file__), description=__doc__)
