"""What an acting prediction records for learning off-policy: the behaviour policy's log-probability
of the action it chose and the version of the weights it acted with.

    class MyAlgorithm(Algorithm):
        records_behaviour = True      # predict answers BEHAVIOUR_LOG_PROB beside the model's actions
    ...
    batch.actions[BEHAVIOUR_LOG_PROB], batch.actions[POLICY_VERSION]    # in learn, one row per step

An algorithm that sets :attr:`~parl.core.algorithm.Algorithm.records_behaviour` has its task
declare :data:`BEHAVIOUR_SPECS` after the model's action specs: its ``predict`` answers
``behaviour_log_prob`` and the task adds ``policy_version``. Being action specs, both travel with
the action through every placement, are stored by the agent with the action it took, and reach
``Algorithm.learn`` in ``batch.actions``; algorithms that do not set it see neither.
"""

from __future__ import annotations

from parl.core.specs import SpecList

#: ``log mu(a_t | s_t)``: the log-probability of the action under the policy that chose it, float32 ``[1]``.
BEHAVIOUR_LOG_PROB = "behaviour_log_prob"
#: The task's weights version when the action was chosen (its optimizer steps so far, or the version a
#: copy acting apart was given), int64 ``[1]``.
POLICY_VERSION = "policy_version"
#: The action specs a task adds for an algorithm that records its behaviour.
BEHAVIOUR_SPECS: SpecList = [
    (BEHAVIOUR_LOG_PROB, dict(shape=[1], dtype="float32")),
    (POLICY_VERSION, dict(shape=[1], dtype="int64")),
]
