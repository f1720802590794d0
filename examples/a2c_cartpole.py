"""A2C on CartPole-v1 with 8 agents as threads feeding one ComputationTask.

    python examples/a2c_cartpole.py [--seed 0] [--agents 8] [--placement threads] [--max-steps 200000]

Every agent sends its last 64 steps as one segment (sooner at an episode's
end); the wrapper joins the segments that arrive together into one update with
n-step returns. Trains until a greedy 10-episode evaluation reaches the target
mean return (or the env step budget runs out), printing progress, then prints a
greedy 50-episode evaluation on fresh seeds. The robot is
examples/configs/a2c_cartpole.yaml; examples/a2c_po_cartpole.py trains the same
algorithm with an LSTM policy on a partially observed CartPole.
"""

from parl.experiment.train.launch import example_config, launch

if __name__ == "__main__":
    launch(example_config(__file__), description=__doc__)
