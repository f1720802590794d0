"""TD3 on Pendulum-v1, exploring with Gaussian action noise (the DDPG example's agent and settings).

    python examples/td3_pendulum.py [--seed 0] [--agents 1] [--placement threads] [--max-steps 30000]

Trains until a deterministic 10-episode evaluation reaches the target mean
return (or the env step budget runs out), printing progress, then prints a
deterministic 50-episode evaluation on fresh seeds. The robot is
examples/configs/td3_pendulum.yaml.
"""

from parl.experiment.train.launch import example_config, launch

if __name__ == "__main__":
    launch(example_config(__file__), description=__doc__)
