"""Fault-injection campaigns (docs/faults.md): fault models, windows, oracles, the
golden and faulted runs, the campaign database.

    from pkasim import load_config
    from pkasim.analysis.faults import Setup, run_campaign

    setup = Setup("fw.elf", open("fw.elf", "rb").read(), load_config(),
                  models=("skip", "reg-flip"), oracles=("exit=0",), detected=("exit=3",))
    result = run_campaign(setup)            # every fault, in this process
    result.summary.outcomes["exploitable"]
"""

from __future__ import annotations

from pkasim.analysis.faults.campaign import CampaignResult, Space, Summary, run_campaign
from pkasim.analysis.faults.engine import Golden, Injector, Setup
from pkasim.analysis.faults.models import Injection, parse_key
from pkasim.analysis.faults.oracles import OUTCOMES, RunOutcome

__all__ = ["OUTCOMES", "CampaignResult", "Golden", "Injection", "Injector", "RunOutcome", "Setup", "Space", "Summary",
           "parse_key", "run_campaign"]
