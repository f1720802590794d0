"""The vocabulary of a robot: Model, Algorithm, Agent, AgentHelper, the Communicator interface, the
batch type, specs and errors. Nothing here knows where agents run or how requests are batched."""
