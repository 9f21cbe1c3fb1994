from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request


class StandardPagination(PageNumberPagination):
    """``?page=`` and ``?page_size=`` (1-500). A page or page size given that is not a whole number in range
    (an empty one included) is a 400 naming it, not quietly replaced by the default."""

    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request: Request) -> int | None:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is not None and not _whole(raw, 1, self.max_page_size):
            raise ValidationError(
                {self.page_size_query_param: [f"must be a whole number from 1 to {self.max_page_size}"]}
            )
        return super().get_page_size(request)

    def get_page_number(self, request: Request, paginator: Any) -> Any:
        raw = request.query_params.get(self.page_query_param)
        if raw is not None and raw not in self.last_page_strings and not _whole(raw, 1, None):
            raise ValidationError({self.page_query_param: ["must be a whole number from 1, or last"]})
        return super().get_page_number(request, paginator)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": self.max_page_size}
            elif parameter["name"] == self.page_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1}
        return parameters


def _whole(raw: str, low: int, high: int | None) -> bool:
    text = raw.strip()
    return text.isascii() and text.isdigit() and low <= int(text) and (high is None or int(text) <= high)
