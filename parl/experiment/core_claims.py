"""Kept for imports of ``parl.experiment.core_claims``: the claims live in :mod:`parl.core_claims`, where
the Manager uses them too."""

from parl.core_claims import CLAIMS_FOLDER, CoreClaim, claim_cores

__all__ = ["CLAIMS_FOLDER", "CoreClaim", "claim_cores"]
