"""DQN on CartPole-v1 with 4 epsilon-greedy agents as threads feeding one ComputationTask.

    python examples/dqn_cartpole.py [--seed 0] [--agents 4] [--placement threads] [--max-steps 150000]

The options of docs/replay.md are overrides of the config's values:

    python examples/dqn_cartpole.py -o tasks.RL.model.dueling=true       # dueling Q head
    python examples/dqn_cartpole.py -o tasks.RL.helper.prioritized=true  # prioritized replay
    python examples/dqn_cartpole.py -o tasks.RL.helper.n_step=3          # 3-step returns

Trains until a greedy 10-episode evaluation reaches the target mean return
and 50 more episodes confirm it (or the env step budget runs out), printing
progress, then prints a greedy 50-episode evaluation on fresh seeds. The robot
is examples/configs/dqn_cartpole.yaml.
"""

from parl.experiment.train.launch import example_config, launch


def __getattr__(name: str) -> object:
    """``EpsilonGreedyAgent``, which this example defined before parl 0.2.0: now
    ``parl.utils.EpsilonGreedyAgent``, given with a DeprecationWarning (configs that name
    ``dqn_cartpole.EpsilonGreedyAgent`` and scripts that import it keep working)."""
    from parl.moved_names import moved_attribute

    return moved_attribute("dqn_cartpole", name)


if __name__ == "__main__":
    launch(example_config(__file__), description=__doc__)
