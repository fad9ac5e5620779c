"""dynamo-2pc for Python: a client of the coordinator's API (``dynamo2pc.client``) and a
participant SDK (``dynamo2pc.participant``), with exact JSON numbers (``dynamo2pc.exactjson``)
and the request signature (``dynamo2pc.signing``)."""

__version__ = "0.1.0"
