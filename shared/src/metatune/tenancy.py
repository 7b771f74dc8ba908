"""Tenants: the teams that share one deployment, each with its own credential, datasets and views.

A tenant is a name (``team-a``): ``metatune secrets --tenant team-a`` writes its NATS credential
(``submitter.team-a.nk``) and its dashboard token beside the others. What it may do follows from
that credential and that token, never from what a message says:

* **Datasets** go to the tenant's own object bucket (:func:`datasets_bucket`): only its
  credential may write there, so no tenant can replace or delete another's dataset; the
  services and agents read every tenant's bucket. Objects are written once (the client refuses a
  key that exists) and every reader checks the submitted SHA-256 before using one.
* **A study belongs to the tenant its spec names** (``StudySpec.tenant``), and the dataset is read
  from that tenant's bucket only: a study claiming another tenant finds no dataset of its own
  there (it cannot write one) and fails its digest check.
* **What a tenant publishes** (submissions, cancellations, its requests) goes out under subjects
  that end in its name (:mod:`metatune.subjects`), the only ones its credential may publish; each
  service refuses a message whose payload names another tenant than its subject
  (:func:`mislabelled`, error code ``foreign_tenant``), and a cancellation of another tenant's
  job or study changes nothing.
* **Reads** go through telemetry's read API and dashboard: a tenant's token sees its own studies,
  their jobs and deliveries; the admin's token sees all. No tenant credential reads the event log.

The tenant that existed before tenants did is :data:`DEFAULT_TENANT`: the ``submitter`` user and
the ``datasets`` bucket, so a deployment with one team changes nothing.
"""

from __future__ import annotations

import re

from .errors import InputNotAllowed

SUBMITTER = "submitter"  # the default tenant's NATS user (external systems, metatune submit)
DEFAULT_TENANT = "default"
TENANT_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$"
_TENANT = re.compile(TENANT_PATTERN)
DATASETS_BUCKET = "datasets"  # the default tenant's; the others' carry their name


def check_tenant(name: str) -> str:
    """``name`` if it is a tenant name (1-32 of a-z, 0-9 and inner hyphens), else InputNotAllowed."""
    if not _TENANT.match(name):
        raise InputNotAllowed(
            f"tenant {name!r}: use 1-32 lowercase letters, digits and inner hyphens (team-a)"
        )
    return name


FOREIGN_TENANT = "foreign_tenant"  # the error code of a message that speaks for another tenant


def mislabelled(subject_tenant: str, claimed: str) -> str | None:
    """Why a message published under ``subject_tenant``'s subject (which the server vouches for)
    but naming ``claimed`` is refused; None when they agree."""
    if subject_tenant == claimed:
        return None
    return f"published by tenant {subject_tenant!r} for tenant {claimed!r}: refused"


def datasets_bucket(tenant: str = DEFAULT_TENANT) -> str:
    """The object bucket holding ``tenant``'s datasets (written by its credential alone)."""
    return DATASETS_BUCKET if tenant == DEFAULT_TENANT else f"{DATASETS_BUCKET}-{tenant}"


def submitter_user(tenant: str = DEFAULT_TENANT) -> str:
    """The NATS user ``tenant`` submits as (its seed: ``<user>.nk`` in the secrets folder)."""
    return SUBMITTER if tenant == DEFAULT_TENANT else f"{SUBMITTER}.{tenant}"


def tenant_of_user(user: str) -> str | None:
    """The tenant a submitter user name belongs to (None: not a submitter)."""
    if user == SUBMITTER:
        return DEFAULT_TENANT
    prefix = f"{SUBMITTER}."
    if user.startswith(prefix) and _TENANT.match(user[len(prefix) :]):
        return user[len(prefix) :]
    return None


__all__ = [
    "DATASETS_BUCKET",
    "DEFAULT_TENANT",
    "FOREIGN_TENANT",
    "SUBMITTER",
    "TENANT_PATTERN",
    "check_tenant",
    "datasets_bucket",
    "mislabelled",
    "submitter_user",
    "tenant_of_user",
]
