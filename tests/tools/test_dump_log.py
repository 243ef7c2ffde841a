"""dump-log against segment files written here byte for byte (batches from our builder, index files
packed by hand, preallocated as Kafka leaves them), compared with Kafka's output format."""

import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from logbroker.cli.dump_log import dump_log
from logbroker.records.builder import build_batch
from logbroker.records.control import build_end_txn_marker_batch
from logbroker.records.record_batch import RecordBatch, iter_batches, set_log_append_time
from logbroker.tools.dump_log import DumpOptions, dump_files

RECORDS_DATA = Path(__file__).parents[1] / "records" / "data"
BASE = 100
SEGMENT = f"{BASE:020d}"


def make_segment(directory: Path) -> tuple[Path, list[bytes]]:
    """Four batches at offsets 100.., one per codec but none, one idempotent, one control."""
    batches = [
        build_batch([(b"k0", b"v0", [("h1", b"a"), ("h2", None)], 1000), (None, b"v1", (), 1010)],
                    base_offset=BASE, partition_leader_epoch=3),
        build_batch([(b"k2", None, (), 1005), (b"k3", "ünï".encode(), (), 1020)], base_offset=BASE + 2,
                    compression="gzip", producer_id=7, producer_epoch=1, base_sequence=40, partition_leader_epoch=3),
        build_batch([(b"k%d" % i, b"x" * 50, (), 1030 + i) for i in range(3)], base_offset=BASE + 4,
                    compression="zstd", partition_leader_epoch=3),
        build_end_txn_marker_batch(commit=True, producer_id=7, producer_epoch=1, coordinator_epoch=9,
                                   timestamp_ms=1050, base_offset=BASE + 7, partition_leader_epoch=3),
    ]
    log = directory / f"{SEGMENT}.log"
    log.write_bytes(b"".join(batches))
    return log, batches


def run(paths, **options) -> tuple[list[str], list[str]]:
    out, err = [], []
    for line in dump_files([str(p) for p in paths], DumpOptions(**options)):
        (err if line.stderr else out).append(line.text)
    return out, err


def test_batch_lines_in_kafka_format(tmp_path):
    log, batches = make_segment(tmp_path)
    out, err = run([log])
    crcs = [RecordBatch(b).header.crc for b in batches]
    sizes = [len(b) for b in batches]
    assert out == [
        f"Dumping {log}",
        "Log starting offset: 100",
        "baseOffset: 100 lastOffset: 101 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 3 isTransactional: false isControl: false "
        f"deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1010 size: {sizes[0]} magic: 2 "
        f"compresscodec: none crc: {crcs[0]} isvalid: true",
        "baseOffset: 102 lastOffset: 103 count: 2 baseSequence: 40 lastSequence: 41 producerId: 7 "
        "producerEpoch: 1 partitionLeaderEpoch: 3 isTransactional: false isControl: false "
        f"deleteHorizonMs: OptionalLong.empty position: {sizes[0]} CreateTime: 1020 size: {sizes[1]} magic: 2 "
        f"compresscodec: gzip crc: {crcs[1]} isvalid: true",
        "baseOffset: 104 lastOffset: 106 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 3 isTransactional: false isControl: false "
        f"deleteHorizonMs: OptionalLong.empty position: {sum(sizes[:2])} CreateTime: 1032 size: {sizes[2]} "
        f"magic: 2 compresscodec: zstd crc: {crcs[2]} isvalid: true",
        "baseOffset: 107 lastOffset: 107 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7 "
        "producerEpoch: 1 partitionLeaderEpoch: 3 isTransactional: true isControl: true "
        f"deleteHorizonMs: OptionalLong.empty position: {sum(sizes[:3])} CreateTime: 1050 size: {sizes[3]} "
        f"magic: 2 compresscodec: none crc: {crcs[3]} isvalid: true",
    ]
    assert err == []


def test_deep_iteration_prints_record_metadata(tmp_path):
    log, _ = make_segment(tmp_path)
    out, err = run([log], deep_iteration=True)
    records = [line for line in out if line.startswith("|")]
    assert records == [
        "| offset: 100 CreateTime: 1000 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [h1,h2]",
        "| offset: 101 CreateTime: 1010 keySize: -1 valueSize: 2 sequence: -1 headerKeys: []",
        "| offset: 102 CreateTime: 1005 keySize: 2 valueSize: -1 sequence: 40 headerKeys: []",
        "| offset: 103 CreateTime: 1020 keySize: 2 valueSize: 5 sequence: 41 headerKeys: []",
        "| offset: 104 CreateTime: 1030 keySize: 2 valueSize: 50 sequence: -1 headerKeys: []",
        "| offset: 105 CreateTime: 1031 keySize: 2 valueSize: 50 sequence: -1 headerKeys: []",
        "| offset: 106 CreateTime: 1032 keySize: 2 valueSize: 50 sequence: -1 headerKeys: []",
        "| offset: 107 CreateTime: 1050 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 9",
    ]
    assert err == []  # offsets 100..107 are consecutive


def test_print_data_log_adds_key_and_payload(tmp_path):
    log, _ = make_segment(tmp_path)
    out, _ = run([log], print_data_log=True)
    records = [line for line in out if line.startswith("|")]
    assert records[0].endswith("headerKeys: [h1,h2] key: k0 payload: v0")
    assert records[1].endswith("headerKeys: [] payload: v1")  # null key: no key part
    assert records[2].endswith("headerKeys: [] key: k2")  # null value: no payload part
    assert records[3].endswith("key: k3 payload: ünï")
    assert records[7].endswith("endTxnMarker: COMMIT coordinatorEpoch: 9")  # control: no contents


def test_skip_record_metadata_prints_contents_only(tmp_path):
    log, _ = make_segment(tmp_path)
    out, _ = run([log], print_data_log=True, skip_record_metadata=True)
    assert "| key: k0 payload: v0" in out
    assert "| payload: v1" in out
    assert not any(line.startswith("| offset") for line in out)


def test_log_append_time_batch(tmp_path):
    raw = bytearray(build_batch([(b"k", b"v", (), 5), (b"k", b"v", (), 6)]))
    set_log_append_time(raw, 0, 777)
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(raw)
    out, _ = run([log], deep_iteration=True)
    assert " LogAppendTime: 777 size: " in out[2]
    assert out[3] == "| offset: 0 LogAppendTime: 777 keySize: 1 valueSize: 1 sequence: -1 headerKeys: []"


def test_delete_horizon_is_shown(tmp_path):
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(build_batch([(b"k", None, (), 5)], delete_horizon_ms=86_400_005))
    out, _ = run([log])
    assert " deleteHorizonMs: OptionalLong[86400005] " in out[2]


@pytest.mark.parametrize("cut", [1, 11, 12, 60, 61])
def test_torn_tail_is_reported_as_invalid_bytes(tmp_path, cut):
    log, batches = make_segment(tmp_path)
    log.write_bytes(b"".join(batches[:3]) + batches[3][:cut])
    out, err = run([log], deep_iteration=True)
    assert sum(line.startswith("baseOffset") for line in out) == 3
    assert out[-1] == f"Found {cut} invalid bytes at the end of {log.name}"
    assert err == []


def test_flipped_crc_byte_shows_isvalid_false_and_goes_on(tmp_path):
    log, batches = make_segment(tmp_path)
    raw = bytearray(log.read_bytes())
    raw[len(batches[0]) + len(batches[1]) - 8] ^= 0xFF  # the gzip trailer's CRC-32, second batch
    log.write_bytes(raw)
    out, err = run([log], print_data_log=True)
    batch_lines = [line for line in out if line.startswith("baseOffset")]
    assert [line.endswith("isvalid: true") for line in batch_lines] == [True, False, True, True]
    assert err[0].startswith(f"Could not read the records of the batch at position {len(batches[0])} "
                             f"of {log.name}: gzip records do not decompress: ")
    assert err[1:] == [f"Non-consecutive offsets in {log.absolute()}", "  101 is followed by 104"]
    assert out[-1].endswith("endTxnMarker: COMMIT coordinatorEpoch: 9")  # the walk went on


def test_flipped_bit_in_an_uncompressed_record_still_prints_it(tmp_path):
    log, batches = make_segment(tmp_path)
    raw = bytearray(log.read_bytes())
    raw[len(batches[0]) - 2] ^= 0x01  # the last byte of the value of the first batch's last record
    log.write_bytes(raw)
    out, err = run([log], print_data_log=True)
    assert out[2].endswith("isvalid: false")
    assert out[4].startswith("| offset: 101") and out[4].endswith("payload: v0")  # was v1
    assert err == []


def test_impossible_header_ends_the_walk_as_invalid_bytes(tmp_path):
    log, batches = make_segment(tmp_path)
    log.write_bytes(b"".join(batches[:2]) + bytes(40) + batches[2])
    out, err = run([log])
    assert sum(line.startswith("baseOffset") for line in out) == 2
    assert out[-1] == f"Found {40 + len(batches[2])} invalid bytes at the end of {log.name}"
    assert err == [f"batch at position {len(batches[0]) + len(batches[1])} has length 0, smaller than "
                   f"the minimum v2 batch overhead (61 bytes in all) in file {log.name}."]


def test_non_consecutive_offsets_are_reported_after_the_files(tmp_path):
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(build_batch([(b"a", b"1", (), 1)], base_offset=0)
                    + build_batch([(b"b", b"2", (), 2)], base_offset=5))
    out, err = run([log], deep_iteration=True)
    assert err == [f"Non-consecutive offsets in {log.absolute()}", "  0 is followed by 5"]


def test_empty_log(tmp_path):
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(b"")
    assert run([log]) == ([f"Dumping {log}", "Log starting offset: 0"], [])


def test_librdkafka_batches_dump_cleanly(tmp_path):
    log = tmp_path / f"{0:020d}.log"
    buf = bytearray(b"".join((RECORDS_DATA / f"librdkafka_{codec}.bin").read_bytes()
                             for codec in ("none", "gzip", "snappy", "lz4", "zstd")))
    # give each batch consecutive offsets, as a broker would
    for i, (position, _) in enumerate(iter_batches(buf)):
        buf[position:position + 8] = struct.pack(">q", 5 * i)
    log.write_bytes(buf)
    out, err = run([log], print_data_log=True)
    assert sum(line.endswith("isvalid: true") for line in out) == 5
    assert sum(line.startswith("| offset") for line in out) == 25
    assert "| offset: 7 CreateTime: 1700000000014 keySize: -1 valueSize: 160 sequence: -1 " \
           "headerKeys: [h1,null-header] payload: " + "value 2 " * 20 in out
    assert err == []


# --- index files ---------------------------------------------------------------------------------

def offset_index_bytes(entries, preallocate_to: int = 0) -> bytes:
    raw = b"".join(struct.pack(">ii", offset - BASE, position) for offset, position in entries)
    return raw + bytes(max(0, preallocate_to - len(raw)))


def time_index_bytes(entries, preallocate_to: int = 0) -> bytes:
    raw = b"".join(struct.pack(">qi", timestamp, offset - BASE) for timestamp, offset in entries)
    return raw + bytes(max(0, preallocate_to - len(raw)))


def positions(batches):
    return [sum(len(b) for b in batches[:i]) for i in range(len(batches))]


def test_offset_index_entries_match_the_log(tmp_path):
    _, batches = make_segment(tmp_path)
    pos = positions(batches)
    index = tmp_path / f"{SEGMENT}.index"
    index.write_bytes(offset_index_bytes([(103, pos[1]), (106, pos[2])], preallocate_to=800))
    out, err = run([index])
    assert out == [f"Dumping {index}", f"offset: 103 position: {pos[1]}", f"offset: 106 position: {pos[2]}"]
    assert err == []


def test_offset_index_mismatch_is_reported_as_kafka_does(tmp_path):
    _, batches = make_segment(tmp_path)
    pos = positions(batches)
    index = tmp_path / f"{SEGMENT}.index"
    # 102 is the first offset of its batch, not the last; position 5 is no batch at all.
    index.write_bytes(offset_index_bytes([(102, pos[1]), (104, 5), (106, pos[2])]))
    out, err = run([index])
    assert out[1:] == [f"offset: 102 position: {pos[1]}", "offset: 104 position: 5", f"offset: 106 position: {pos[2]}"]
    assert err == [f"Mismatches in :{index.absolute()}", "  Index offset: 104, log offset: -1",
                   "  Index offset: 102, log offset: 103"]


def test_verify_index_only_prints_no_entries(tmp_path):
    _, batches = make_segment(tmp_path)
    index = tmp_path / f"{SEGMENT}.index"
    index.write_bytes(offset_index_bytes([(102, positions(batches)[1])]))
    out, err = run([index], verify_index_only=True)
    assert out == [f"Dumping {index}"]
    assert err[0] == f"Mismatches in :{index.absolute()}"


def test_empty_index(tmp_path):
    make_segment(tmp_path)
    index = tmp_path / f"{SEGMENT}.index"
    index.write_bytes(b"")
    assert run([index])[0] == [f"Dumping {index}", f"{index} is empty."]


def test_index_sanity_check(tmp_path):
    _, batches = make_segment(tmp_path)
    index = tmp_path / f"{SEGMENT}.index"
    index.write_bytes(offset_index_bytes([(103, positions(batches)[1])]))
    assert run([index], index_sanity_check=True)[0][1] == f"{index} passed sanity check."
    index.write_bytes(offset_index_bytes([(103, positions(batches)[1])]) + b"\x00\x00\x00")
    out, err = run([index], index_sanity_check=True)
    assert out == [f"Dumping {index}"]
    assert "neither positive nor a multiple of 8" in err[0]


def test_time_index_entries_match_the_log(tmp_path):
    _, batches = make_segment(tmp_path)
    pos = positions(batches)
    (tmp_path / f"{SEGMENT}.index").write_bytes(offset_index_bytes([(103, pos[1]), (106, pos[2])]))
    time_index = tmp_path / f"{SEGMENT}.timeindex"
    time_index.write_bytes(time_index_bytes([(1010, 101), (1020, 103), (1032, 106), (1050, 107)], 1200))
    out, err = run([time_index])
    assert out[1:] == ["timestamp: 1010 offset: 101", "timestamp: 1020 offset: 103",
                       "timestamp: 1032 offset: 106", "timestamp: 1050 offset: 107"]
    assert err == []


def test_time_index_problems_are_reported_as_kafka_does(tmp_path):
    _, batches = make_segment(tmp_path)
    time_index = tmp_path / f"{SEGMENT}.timeindex"  # no .index beside it: scan from position 0
    time_index.write_bytes(time_index_bytes([(1011, 101), (1020, 102), (1005, 103), (2000, 900)]))
    out, err = run([time_index])
    name = time_index.absolute()
    assert err == [
        f"Found timestamp mismatch in :{name}", "  Index timestamp: 1011, log timestamp: 1010",
        "  Index timestamp: 1005, log timestamp: 1020",
        f"Found out of order timestamp in :{name}", "  Index timestamp: 1005, Previously indexed timestamp: 1020",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 102, found log offset: 103", "Indexed offset: 900, found log offset: -1",
    ]


def test_time_index_sanity_check(tmp_path):
    make_segment(tmp_path)
    time_index = tmp_path / f"{SEGMENT}.timeindex"
    time_index.write_bytes(time_index_bytes([(1010, 101), (1000, 103)]))
    out, err = run([time_index], index_sanity_check=True)
    assert "last timestamp is 1000 which is less than the first timestamp 1010" in err[0]


def test_index_without_its_log_lists_entries_unchecked(tmp_path):
    index = tmp_path / f"{SEGMENT}.index"
    index.write_bytes(offset_index_bytes([(103, 150)]))
    out, err = run([index])
    assert out[1:] == ["offset: 103 position: 150"]
    assert err == [f"No log file {SEGMENT}.log beside {index.name}: entries not checked"]


# --- other files and the command ---------------------------------------------------------------

def test_txn_index_entries(tmp_path):
    txn = tmp_path / f"{SEGMENT}.txnindex"
    txn.write_bytes(struct.pack(">hqqqq", 0, 7, 100, 120, 121) + struct.pack(">hqqqq", 0, 8, 130, 140, 150))
    out, err = run([txn])
    assert out[1:] == ["version: 0 producerId: 7 firstOffset: 100 lastOffset: 120 lastStableOffset: 121",
                       "version: 0 producerId: 8 firstOffset: 130 lastOffset: 140 lastStableOffset: 150"]


def test_producer_snapshot_entries(tmp_path):
    from logbroker.storage.producer_snapshot import encode_snapshot
    from logbroker.storage.producer_state_entry import BatchMetadata, ProducerStateEntry
    snapshot = tmp_path / f"{108:020d}.snapshot"
    snapshot.write_bytes(encode_snapshot([ProducerStateEntry(
        7, producer_epoch=1, coordinator_epoch=-1, last_timestamp=1020,
        batch_metadata=[BatchMetadata(last_seq=41, last_offset=103, offset_delta=1, timestamp=1020)])]))
    out, err = run([snapshot])
    assert out[1:] == ["producerId: 7 producerEpoch: 1 coordinatorEpoch: -1 currentTxnFirstOffset: "
                       "OptionalLong.empty lastTimestamp: 1020 firstSequence: 40 lastSequence: 41 "
                       "lastOffset: 103 offsetDelta: 1 timestamp: 1020"]


def test_unknown_and_missing_files(tmp_path):
    other = tmp_path / "leader-epoch-checkpoint"
    other.write_text("0\n0\n")
    missing = tmp_path / f"{0:020d}.log"
    out, err = run([other, missing])
    assert out == [f"Dumping {other}", f"Dumping {missing}", "Log starting offset: 0"]
    assert err[0] == f"Ignoring unknown file {other}"
    assert err[1].startswith(f"Could not read {missing}: ")


def test_command_takes_files_as_kafka_does_and_as_arguments(tmp_path):
    log, batches = make_segment(tmp_path)
    index = tmp_path / f"{SEGMENT}.index"
    index.write_bytes(offset_index_bytes([(103, len(batches[0]))]))
    runner = CliRunner()
    result = runner.invoke(dump_log, ["--files", f"{log},{index}", "--deep-iteration"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"Dumping {log}"
    assert f"Dumping {index}" in lines
    assert sum(line.startswith("| offset") for line in lines) == 8
    positional = runner.invoke(dump_log, [str(log), "-f", str(index)])
    assert positional.exit_code == 0
    assert positional.stdout.splitlines()[0] == f"Dumping {index}"  # --files first, then FILE...


def test_command_exit_status(tmp_path):
    runner = CliRunner()
    assert runner.invoke(dump_log, []).exit_code == 2
    result = runner.invoke(dump_log, [str(tmp_path / "00000000000000000000.log")])
    assert result.exit_code == 1
    assert "Could not read" in result.stderr


def test_logbroker_dump_log_verb(tmp_path):
    from logbroker.cli.main import main
    log, _ = make_segment(tmp_path)
    result = CliRunner().invoke(main, ["dump-log", "--print-data-log", "--files", str(log)])
    assert result.exit_code == 0, result.output
    assert ("| offset: 100 CreateTime: 1000 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [h1,h2] "
            "key: k0 payload: v0") in result.stdout.splitlines()


def test_txn_index_and_markers_written_by_the_log(tmp_path):
    from logbroker.clock import ManualClock
    from logbroker.storage.log import Log
    from logbroker.storage.log_config import LogConfig

    log = Log.open(tmp_path / "t-0", LogConfig.defaults(), clock=ManualClock(1000))
    log.append_as_leader(bytearray(build_batch([(b"k", b"v", (), 1000)] * 2, producer_id=5,
                                               producer_epoch=0, base_sequence=0, transactional=True)),
                         leader_epoch=0)
    log.append_as_leader(build_end_txn_marker_batch(commit=False, producer_id=5, producer_epoch=0,
                                                    coordinator_epoch=2, timestamp_ms=1000),
                         leader_epoch=0, is_from_client=False)
    log.close()
    out, _ = run([tmp_path / "t-0" / f"{0:020d}.txnindex"])
    assert out[1:] == ["version: 0 producerId: 5 firstOffset: 0 lastOffset: 2 lastStableOffset: 3"]
    out, _ = run([tmp_path / "t-0" / f"{0:020d}.log"], deep_iteration=True)
    assert "isTransactional: true isControl: true" in out[-2]
    assert out[-1].endswith("endTxnMarker: ABORT coordinatorEpoch: 2")
