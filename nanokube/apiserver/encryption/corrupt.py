"""Upstream's answers for objects whose stored values do not transform (KEP-3926's corrupt objects):
a get's InternalError naming the key, a list's aggregated error, which is no API status of its own
(a 500 without a reason); and the way out, a delete with
DeleteOptions.ignoreStoreReadErrorWithClusterBreakingPotential (AllowUnsafeMalformedObjectDeletion),
which removes the stored value unread: no finalizers, no grace, no garbage collector's say, so it
takes the `unsafe-delete-ignore-read-errors` verb on the resource beside `delete`."""

from __future__ import annotations

from ...machinery import errors
from ...machinery.user import User
from ...machinery.validation import invalid
from ..auth.authorizer import Attributes, decide
from ..options import IGNORE_READ_ERROR

#: the verb a delete with IGNORE_READ_ERROR takes
UNSAFE_DELETE = "unsafe-delete-ignore-read-errors"


def corrupt_object(key: str) -> str:
    """storage.NewCorruptObjError's text for a value that does not transform."""
    return (f"StorageError: corrupt object, Code: 7, Key: {key}, ResourceVersion: 0, "
            f"AdditionalErrorMsg: data from the storage is not transformable")


def unreadable_error(keys: list[str]) -> errors.APIError:
    if len(keys) == 1:
        return errors.internal(corrupt_object(keys[0]))
    lines = "".join(f"\t{corrupt_object(k)}\n" for k in keys)
    return errors.APIError(500, "", f"unable to transform or decode {len(keys)} objects: {{\n{lines}}}")


async def admit_unsafe_delete(authorizer, user: User, group: str, version: str, plural: str, namespace: str | None,
                              name: str) -> None:
    """The unsafe-delete admission: the user may do `unsafe-delete-ignore-read-errors` on the object
    (no authorizer: an in-process server that authorizes nothing)."""
    if authorizer is None:
        return
    a = Attributes(UNSAFE_DELETE, "", True, group, version, plural, "", namespace or "", name)
    decision = await decide(authorizer, user, a)
    if decision.error:
        raise errors.forbidden(group, plural, name, f'error while checking permission for "{UNSAFE_DELETE}", '
                                                    f"{decision.error}")
    if not decision.allowed:
        raise errors.forbidden(group, plural, name, f'not permitted to do "{UNSAFE_DELETE}", reason: {decision.reason}')


def not_corrupt(group: str, plural: str, name: str) -> errors.APIError:
    """The option on an object that reads: only a corrupt one may be deleted so."""
    return errors.invalid(group, plural, name, [invalid(IGNORE_READ_ERROR, True, "is exclusively used to delete "
                                                        "corrupt object(s), try again by removing this option")])
