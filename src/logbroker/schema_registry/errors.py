"""The registry's errors, each with Confluent's HTTP status, `error_code` and message (Confluent's
rest/exceptions/Errors.java); the REST app turns any of them into the JSON body
`{"error_code": …, "message": …}`, and only there."""

from __future__ import annotations


class RegistryError(Exception):
    status = 500
    error_code = 50001

    def __init__(self, message: str, *, error_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if error_code is not None:
            self.error_code = error_code


class HttpError(RegistryError):
    """An answer of the HTTP layer (Jersey's in Confluent's registry): the status is the error_code."""

    REASONS = {404: "Not Found", 405: "Method Not Allowed", 415: "Unsupported Media Type"}

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status} {self.REASONS[status]}", error_code=status)
        self.status = status


class SubjectNotFound(RegistryError):
    status, error_code = 404, 40401

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' not found.")


class VersionNotFound(RegistryError):
    status, error_code = 404, 40402

    def __init__(self, version: int | str) -> None:
        super().__init__(f"Version {version} not found.")


class SchemaNotFound(RegistryError):
    status, error_code = 404, 40403

    def __init__(self, schema_id: int | None = None) -> None:
        super().__init__("Schema not found" if schema_id is None else f"Schema {schema_id} not found")


class SubjectSoftDeleted(RegistryError):
    status, error_code = 404, 40404

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")


class SubjectNotSoftDeleted(RegistryError):
    status, error_code = 404, 40405

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' was not deleted first before being permanently deleted")


class VersionSoftDeleted(RegistryError):
    status, error_code = 404, 40406

    def __init__(self, subject: str, version: int) -> None:
        super().__init__(f"Subject '{subject}' Version {version} was soft deleted."
                         "Set permanent=true to delete permanently")


class VersionNotSoftDeleted(RegistryError):
    status, error_code = 404, 40407

    def __init__(self, subject: str, version: int) -> None:
        super().__init__(f"Subject '{subject}' Version {version} was not deleted first before "
                         "being permanently deleted")


class SubjectCompatibilityNotConfigured(RegistryError):
    status, error_code = 404, 40408

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' does not have subject-level compatibility configured")


class SubjectModeNotConfigured(RegistryError):
    status, error_code = 404, 40409

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' does not have subject-level mode configured")


class IncompatibleSchema(RegistryError):
    status, error_code = 409, 409


class InvalidSchema(RegistryError):
    status, error_code = 422, 42201


class InvalidVersion(RegistryError):
    status, error_code = 422, 42202

    def __init__(self, version: str) -> None:
        super().__init__(f"The specified version '{version}' is not a valid version id. "
                         'Allowed values are between [1, 2^31-1] and the string "latest"')


class InvalidCompatibilityLevel(RegistryError):
    status, error_code = 422, 42203

    def __init__(self) -> None:
        super().__init__("Invalid compatibility level. Valid values are none, backward, forward, "
                         "full, backward_transitive, forward_transitive, and full_transitive")


class InvalidMode(RegistryError):
    status, error_code = 422, 42204

    def __init__(self) -> None:
        super().__init__("Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD.")


class OperationNotPermitted(RegistryError):
    status, error_code = 422, 42205


class ReferenceExists(RegistryError):
    status, error_code = 422, 42206

    def __init__(self, key: str) -> None:
        super().__init__(f"One or more references exist to the schema {key}.")


class IdDoesNotMatch(RegistryError):
    status, error_code = 422, 42207


class InvalidSubject(RegistryError):
    status, error_code = 422, 42208

    def __init__(self, subject: str) -> None:
        super().__init__(f"The specified subject '{subject}' is not a valid.")


class SchemaTooLarge(RegistryError):
    status, error_code = 422, 42209


class StoreError(RegistryError):
    status, error_code = 500, 50001


class OperationTimeout(RegistryError):
    status, error_code = 500, 50002


class ForwardingFailed(RegistryError):
    status, error_code = 500, 50003


class UnknownLeader(RegistryError):
    status, error_code = 500, 50004


class Unauthorized(RegistryError):
    status, error_code = 401, 401

    def __init__(self) -> None:
        super().__init__("Unauthorized")


class Forbidden(RegistryError):
    status, error_code = 403, 40301


class BadRequest(RegistryError):
    """A body that is not JSON: rest-utils' JsonParseExceptionMapper answers 400, error_code 400."""

    status, error_code = 400, 400


class UnprocessableBody(RegistryError):
    """JSON of the wrong shape: rest-utils' JsonMappingExceptionMapper answers 422, error_code 422."""

    status, error_code = 422, 422
