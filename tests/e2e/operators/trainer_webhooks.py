"""kopf's admission webhooks for Trainers, the configurations kopf itself keeps (`managed`):
a validating handler refusing more than 4 replicas and a mutating one labelling every
Trainer. Serves TLS from TRAINER_WEBHOOK_CERT/KEY (issued by TRAINER_WEBHOOK_CA, the
caBundle kopf writes) on 127.0.0.1:TRAINER_WEBHOOK_PORT."""

import os

import kopf

GROUP, VERSION, PLURAL = "ops.example.com", "v1", "trainers"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    settings.admission.server = kopf.WebhookServer(
        addr="127.0.0.1", host="127.0.0.1", port=int(os.environ["TRAINER_WEBHOOK_PORT"]),
        certfile=os.environ["TRAINER_WEBHOOK_CERT"], pkeyfile=os.environ["TRAINER_WEBHOOK_KEY"],
        cafile=os.environ["TRAINER_WEBHOOK_CA"])
    settings.admission.managed = f"{PLURAL}.{GROUP}"


@kopf.on.validate(GROUP, VERSION, PLURAL)
def at_most_four(spec, **_):
    if spec.get("replicas", 0) > 4:
        raise kopf.AdmissionError("at most 4 replicas", code=400)


@kopf.on.mutate(GROUP, VERSION, PLURAL)
def label(patch, **_):
    patch.metadata["labels"] = {"mutated-by": "kopf"}
