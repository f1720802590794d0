"""DQN self-play on PettingZoo tic-tac-toe, against frozen snapshots of the learner, seats swapped every episode.

    python examples/dqn_tictactoe_selfplay.py [--seed 0] [--agents 8] [--max-steps 100000]
    python benchmarks/selfplay.py examples/configs/dqn_tictactoe_selfplay.yaml   # then against a random player

Task RL learns by replay (Double DQN over parl.models.MaskedMLPQModel: illegal moves masked by the
observation's action_mask); task opponent never learns and plays snapshots of RL, one taken every 1,000
of its updates (docs/multiagent.md, "Self-play"). RL explores epsilon-greedily and the opponent plays a
random legal move on 30% of its turns (agent.random_moves). The robot is
examples/configs/dqn_tictactoe_selfplay.yaml; ``-o KEY.PATH=VALUE`` changes any of its values.
"""

from parl.experiment.train.launch import example_config, launch

if __name__ == "__main__":
    launch(example_config(__file__), description=__doc__)
