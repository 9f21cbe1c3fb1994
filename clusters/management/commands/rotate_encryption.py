"""Re-encrypt every encrypted column with the newest key in FIELD_ENCRYPTION_KEYS."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.db import connection, transaction

from controlplane.crypto import encrypted_fields, rotate


class Command(BaseCommand):
    help = "Re-encrypt every encrypted field with the newest key in FIELD_ENCRYPTION_KEYS."

    def handle(self, *args: Any, **options: Any) -> None:
        total = 0
        for model, columns in encrypted_fields():
            table = model._meta.db_table
            pk = model._meta.pk
            assert pk is not None
            pk_column = str(pk.column)
            qn = connection.ops.quote_name
            with transaction.atomic():
                # Raw reads and writes: the stored tokens are rotated without passing through the plaintext
                # field machinery, so nothing else on the row changes.
                select_cols = ", ".join(qn(c) for c in columns)
                with connection.cursor() as cursor:
                    cursor.execute(f"SELECT {qn(pk_column)}, {select_cols} FROM {qn(table)}")  # noqa: S608
                    rows = cursor.fetchall()
                for row in rows:
                    updates = {col: rotate(val) for col, val in zip(columns, row[1:], strict=True) if val}
                    if not updates:
                        continue
                    assignments = ", ".join(f"{qn(col)} = %s" for col in updates)
                    with connection.cursor() as cursor:
                        cursor.execute(
                            f"UPDATE {qn(table)} SET {assignments} WHERE {qn(pk_column)} = %s",  # noqa: S608
                            [*updates.values(), row[0]],
                        )
                    total += 1
            self.stdout.write(f"{model._meta.label}: {len(rows)} rows checked")
        self.stdout.write(self.style.SUCCESS(f"re-encrypted {total} rows with the newest key"))
