def test_the_snapshot_schema_documents_every_derived_value_with_its_unit():
    from telemetry.api.serializers import UNITS, MetricsSerializer, TotalsSerializer
    from telemetry.snapshot import METRIC_FIELDS, Totals

    assert set(MetricsSerializer().fields) == set(METRIC_FIELDS) == set(UNITS)
    assert set(TotalsSerializer().fields) == set(Totals.__annotations__)
    assert all("SECONDS" in UNITS[name] for name in METRIC_FIELDS if name.startswith(("ttft_", "tbt_")))
