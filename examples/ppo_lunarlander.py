"""PPO on LunarLander-v3 with rl-zoo's LunarLander settings, 16 agents as threads, synchronously.

    python examples/ppo_lunarlander.py [--seed 0] [--agents 16] [--max-steps 1000000]

Needs Box2D (``pip install -c constraints.txt -e ".[box2d]"``). Every agent sends its last 1024
transitions (fewer when its episode ends) and waits; the task updates once all agents' segments are
in, in minibatches of 64 rows, 4 epochs. Trains until a greedy 10-episode evaluation reaches 200,
confirmed on 50 more episodes (or 1M env steps run out), then prints a greedy 50-episode evaluation
on fresh seeds. The robot is examples/configs/ppo_lunarlander.yaml (docs/algorithms/ppo.md maps
rl-zoo's names to its keys); ``-o KEY.PATH=VALUE`` changes any of its values.
"""

from parl.experiment.train.launch import example_config, launch

if __name__ == "__main__":
    launch(example_config(__file__), description=__doc__)
