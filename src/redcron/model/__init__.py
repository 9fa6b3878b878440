"""What is data, and its validation; no Redis, no processes.

- ``jobs``: job specs and the DAG of a job's tasks (``JobSpec``, ``Task``), and
  the JSON a job hash stores them as (``spec_json``, ``spec_from_json``).
- ``jobfile``: job files (YAML/JSON) into specs.
- ``tenants``: a tenant's dispatch settings.
- ``states``: task and run states (the Lua tables are generated from them).
- ``validation``: the checks every number and name coming in goes through.
- ``binding``: does a call's ``[args, kwargs]`` fit a task function's signature.
- ``records``: what the library returns (a task, a job, a run...), one module
  per area, and ``serialize``: the one JSON form of them (CLI ``--json``, the
  API).  The doctor's records live beside it (``redcron.doctor.records``).
"""

# every record, by the records package's own list (one list, not two)
from redcron.model.records import *  # noqa: F403
from redcron.model.records import __all__ as _records
from redcron.model.serialize import to_json

__all__ = [*_records, "to_json"]
