"""PPO self-play on PettingZoo tic-tac-toe, against frozen snapshots of the learner, seats swapped every episode.

    python examples/ppo_tictactoe_selfplay.py [--seed 0] [--agents 32] [--max-steps 100000]
    python benchmarks/selfplay.py examples/configs/ppo_tictactoe_selfplay.yaml   # then against a random player

Task RL learns; task opponent never learns and plays snapshots of RL, one taken every 16 of its
optimizer steps (docs/multiagent.md, "Self-play"). Illegal moves are masked by the observation's action_mask
(parl.models.MaskedMLPActorCritic). The robot is examples/configs/ppo_tictactoe_selfplay.yaml;
``-o KEY.PATH=VALUE`` changes any of its values.
"""

from parl.experiment.train.launch import example_config, launch

if __name__ == "__main__":
    launch(example_config(__file__), description=__doc__)
