"""parl.framework: the robot's vocabulary — Model, Algorithm, ComputationTask, Agent, AgentHelper,
Communicator, ComputationWrapper and Manager."""
