"""Shared PPO on MPE simple_spread: three cooperating agents, one policy and one critic for all of them.

    python examples/ppo_simple_spread.py [--seed 0] [--agents 16] [--max-steps 50000]

Each of the ``--agents`` env copies plays one helper per environment agent, all three bound to task RL
(``agent.policy_mapping: RL``); an update joins one 25-step segment from each env copy. Prints a greedy
evaluation on fresh seeds at the end: the mean agent return per episode. The robot is
examples/configs/ppo_simple_spread.yaml; ``-o KEY.PATH=VALUE`` changes any of its values.
"""

from parl.experiment.train.launch import example_config, launch

if __name__ == "__main__":
    launch(example_config(__file__), description=__doc__)
