"""client-go's tools/pager ListPager: a list asked for in pages of `page_size` items (limit, then
each page's continue token, the resourceVersion cleared after the first, as the server allows no
other), joined into one list at the first page's resourceVersion. A continue token that expired
(410 Expired) after the first page gives way to one full list at the version first asked for, so a
long list still completes (FullListIfExpired). The server may serve the whole list in one page
anyway (the watch cache ignores the limit of a list at resourceVersion "0")."""

from __future__ import annotations

from ..machinery.errors import APIError

#: the pager's defaultPageSize
PAGE_SIZE = 500


async def list_pages(rc, namespace: str | None, label_selector: str, field_selector: str, resource_version: str,
                     page_size: int = PAGE_SIZE) -> tuple[list[dict], str, bool]:
    """(items, the list's resourceVersion, whether it came in more than one page); `page_size` 0
    lists in one request without a limit. A client that cannot page (no `list_page`) lists once."""
    page = getattr(rc, "list_page", None)
    if page is None:
        items, rv = await rc.list(namespace, label_selector, field_selector, resource_version=resource_version)
        return items, rv, False
    items: list[dict] = []
    first_rv: str | None = None
    asked, token, paginated = resource_version, "", False
    while True:
        try:
            got, meta = await page(namespace, label_selector, field_selector, resource_version=asked,
                                   limit=page_size, continue_=token)
        except APIError as e:
            if e.reason != "Expired" or not token:
                raise
            got, meta = await page(namespace, label_selector, field_selector, resource_version=resource_version)
            return got, meta.get("resourceVersion", ""), paginated
        more = meta.get("continue") or ""
        if first_rv is None:
            if not more:
                return got, meta.get("resourceVersion", ""), paginated
            first_rv = meta.get("resourceVersion", "")
        items.extend(got)
        if not more:
            return items, first_rv, paginated
        asked, token, paginated = "", more, True
