"""TD3 on Pendulum-v1, with the agent, exploration noise and settings of examples/ddpg_pendulum.py.

    python examples/td3_pendulum.py [--seed 0] [--agents 1] [--placement threads] [--max-steps 30000]

TD3 (docs/algorithms/td3.md) is DDPG with twin critics, target policy smoothing and delayed actor
updates; the run trains, evaluates and prints as the DDPG example's does. The robot is
examples/configs/td3_pendulum.yaml.
"""

from parl.experiment.train.launch import example_config, launch

if __name__ == "__main__":
    launch(example_config(__file__), description=__doc__)
