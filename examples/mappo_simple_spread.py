"""MAPPO on MPE simple_spread: shared PPO whose critic reads the environment's global state.

    python examples/mappo_simple_spread.py [--seed 0] [--agents 16] [--max-steps 50000]

As examples/ppo_simple_spread.py, with ``agent.global_state: state`` (every agent's requests carry
``env.state()``) and parl.models.CentralCriticActorCritic (the actor reads ``obs``, the critic ``state``).
The robot is examples/configs/mappo_simple_spread.yaml; ``-o KEY.PATH=VALUE`` changes any of its values.
"""

from parl.experiment.train.launch import example_config, launch

if __name__ == "__main__":
    launch(example_config(__file__), description=__doc__)
