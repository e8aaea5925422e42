-- Wireshark / tshark dissector for stormgate's LTP (lib/wire/ltp_header.h): every message
-- type, big-endian fields as on the wire. Load it with
--   tshark -X lua_script:tools/wireshark/stormgate_ltp.lua -r capture.pcap
-- or copy it to ~/.local/lib/wireshark/plugins/. LTP runs on UDP port 7400 by default
-- (Preferences > Protocols > STORMGATE-LTP to change it; "Decode As" works too).
-- New message types: add an entry to `bodies` below; unknown types are shown as such.

local ltp = Proto("stormgate_ltp", "stormgate LTP")

local types = { [1] = "DATA", [2] = "ACK", [3] = "CLOSE", [4] = "CONTROL", [5] = "REJECT", [6] = "PROBE" }
local close_reasons = { [0] = "complete", [1] = "early close", [2] = "superseded", [3] = "abandoned",
                        [4] = "stale", [5] = "refused" }
local codecs = { [0] = "f32", [1] = "f16", [2] = "bf16", [3] = "int8", [4] = "topk" }
local reject_reasons = { [1] = "version", [2] = "type" }

local F = ProtoField
local f = {
  magic = F.uint16("stormgate_ltp.magic", "Magic", base.HEX),
  version = F.uint8("stormgate_ltp.version", "Version"),
  type = F.uint8("stormgate_ltp.type", "Type", base.DEC, types),
  flags = F.uint8("stormgate_ltp.flags", "Flags", base.HEX),
  flag_retx = F.bool("stormgate_ltp.flags.retransmit", "Retransmit", 8, nil, 0x01),
  flag_tag = F.bool("stormgate_ltp.flags.sealed", "Sealed", 8, nil, 0x02),
  flag_more = F.bool("stormgate_ltp.flags.more", "More", 8, nil, 0x04),
  flag_partial = F.bool("stormgate_ltp.flags.partial", "Partial", 8, nil, 0x08),
  flag_app_limited = F.bool("stormgate_ltp.flags.app_limited", "App-limited", 8, nil, 0x10),
  flag_held = F.bool("stormgate_ltp.flags.held", "Held (ACK of replayed DATA)", 8, nil, 0x20),
  reserved = F.uint8("stormgate_ltp.reserved", "Reserved"),
  src_node = F.uint16("stormgate_ltp.src_node", "Source site"),
  job = F.uint32("stormgate_ltp.job", "Job"),
  round = F.uint32("stormgate_ltp.round", "Round"),
  policy = F.uint32("stormgate_ltp.policy_version", "Policy version"),
  shard = F.uint16("stormgate_ltp.shard", "Shard"),
  path_id = F.uint16("stormgate_ltp.path_id", "Path id", base.HEX),
  path_relayed = F.bool("stormgate_ltp.path_id.relayed", "Relayed", 16, nil, 0x8000),
  path_slot = F.uint16("stormgate_ltp.path_id.slot", "Path slot", base.DEC, nil, 0x7000),
  path_dst = F.uint16("stormgate_ltp.path_id.destination", "Relay destination", base.DEC, nil, 0x0fff),
  chunk_index = F.uint32("stormgate_ltp.chunk_index", "Chunk index"),
  chunk_count = F.uint32("stormgate_ltp.chunk_count", "Chunk count"),
  contributors = F.uint16("stormgate_ltp.contributors", "Contributors"),
  codec = F.uint8("stormgate_ltp.codec", "Codec", base.DEC, codecs),
  holes = F.uint8("stormgate_ltp.holes", "Holes", base.HEX),
  payload_len = F.uint16("stormgate_ltp.payload_len", "Payload length"),
  reserved16 = F.uint16("stormgate_ltp.reserved2", "Reserved"),
  send_ts = F.uint64("stormgate_ltp.send_ts", "Send time (ns)"),
  echo_ts = F.uint64("stormgate_ltp.echo_ts", "Echoed time (ns)"),
  ack_ts = F.uint64("stormgate_ltp.ack_ts", "ACK time (ns)"),
  cum_ack = F.uint32("stormgate_ltp.cum_ack", "Cumulative ACK"),
  received = F.uint32("stormgate_ltp.received", "Chunks received"),
  sack_base = F.uint32("stormgate_ltp.sack_base", "SACK base"),
  sack = F.bytes("stormgate_ltp.sack", "SACK bitmap"),
  reason = F.uint8("stormgate_ltp.close_reason", "Close reason", base.DEC, close_reasons),
  fill_rule = F.uint8("stormgate_ltp.fill_rule", "Fill rule"),
  kept = F.uint32("stormgate_ltp.kept_count", "Chunks kept"),
  bitmap_base = F.uint32("stormgate_ltp.bitmap_base", "Bitmap base"),
  bitmap_bytes = F.uint16("stormgate_ltp.bitmap_bytes", "Bitmap bytes"),
  bitmap = F.bytes("stormgate_ltp.bitmap", "Kept bitmap"),
  channel = F.uint16("stormgate_ltp.channel", "Channel"),
  seq = F.uint32("stormgate_ltp.seq", "Sequence"),
  ack = F.uint32("stormgate_ltp.ack", "Acknowledged"),
  session = F.uint32("stormgate_ltp.session", "Sender incarnation"),
  reject_reason = F.uint8("stormgate_ltp.reject_reason", "Reject reason", base.DEC, reject_reasons),
  min_version = F.uint8("stormgate_ltp.min_version", "Min version"),
  max_version = F.uint8("stormgate_ltp.max_version", "Max version"),
  offending = F.uint8("stormgate_ltp.offending_version", "Offending version"),
  train = F.uint32("stormgate_ltp.probe_train", "Probe train"),
  probe_seq = F.uint16("stormgate_ltp.probe_seq", "Probe packet"),
  probe_count = F.uint16("stormgate_ltp.probe_count", "Packets in train"),
  dst_node = F.uint16("stormgate_ltp.dst_node", "Destination site"),
  rx_ts = F.uint64("stormgate_ltp.rx_ts", "Receive time (ns)"),
  payload = F.bytes("stormgate_ltp.payload", "Payload"),
  tr_epoch = F.uint32("stormgate_ltp.trailer.epoch", "Key epoch"),
  tr_lane = F.uint8("stormgate_ltp.trailer.lane", "Sender lane"),
  tr_pn = F.uint24("stormgate_ltp.trailer.pn", "Packet number"),
  tag = F.bytes("stormgate_ltp.auth_tag", "AEAD tag"),
}
local list = {}
for _, v in pairs(f) do list[#list + 1] = v end
ltp.fields = list

local e_short = ProtoExpert.new("stormgate_ltp.short", "Message shorter than its header", expert.group.MALFORMED,
                                expert.severity.ERROR)
local e_magic = ProtoExpert.new("stormgate_ltp.bad_magic", "Not LTP (magic is not 'LT')", expert.group.MALFORMED,
                                expert.severity.WARN)
local e_type = ProtoExpert.new("stormgate_ltp.unknown_type", "Unknown message type", expert.group.UNDECODED,
                               expert.severity.NOTE)
ltp.experts = { e_short, e_magic, e_type }

ltp.prefs.port = Pref.uint("UDP port", 7400, "stormgate's LTP port (transport.udp_port)")

-- Each body: header length after the 12-byte common header, and a function adding its fields.
-- It returns the offset where the message's variable part (payload, bitmap) starts and its length.
local function add_path(t, buf)
  local p = t:add(f.path_id, buf)
  p:add(f.path_relayed, buf)
  p:add(f.path_slot, buf)
  p:add(f.path_dst, buf)
end

local bodies = {
  [1] = { len = 44, add = function(t, b)  -- DATA
    t:add(f.round, b(12, 4)); t:add(f.policy, b(16, 4)); t:add(f.shard, b(20, 2)); add_path(t, b(22, 2))
    t:add(f.chunk_index, b(24, 4)); t:add(f.chunk_count, b(28, 4)); t:add(f.contributors, b(32, 2))
    t:add(f.codec, b(34, 1)); t:add(f.holes, b(35, 1)); t:add(f.payload_len, b(36, 2)); t:add(f.reserved16, b(38, 2))
    t:add(f.send_ts, b(40, 8)); t:add(f.echo_ts, b(48, 8))
    return 56, b(36, 2):uint(), f.payload,
      string.format("round %d shard %d chunk %d/%d", b(12, 4):uint(), b(20, 2):uint(), b(24, 4):uint(), b(28, 4):uint())
  end },
  [2] = { len = 104, add = function(t, b)  -- ACK
    t:add(f.round, b(12, 4)); t:add(f.policy, b(16, 4)); t:add(f.shard, b(20, 2)); add_path(t, b(22, 2))
    t:add(f.cum_ack, b(24, 4)); t:add(f.received, b(28, 4)); t:add(f.ack_ts, b(32, 8)); t:add(f.echo_ts, b(40, 8))
    t:add(f.sack_base, b(48, 4)); t:add(f.sack, b(52, 64))
    return 116, 0, nil, string.format("round %d shard %d cum %d", b(12, 4):uint(), b(20, 2):uint(), b(24, 4):uint())
  end },
  [3] = { len = 28, add = function(t, b)  -- CLOSE
    t:add(f.round, b(12, 4)); t:add(f.policy, b(16, 4)); t:add(f.shard, b(20, 2)); t:add(f.reason, b(22, 1))
    t:add(f.fill_rule, b(23, 1)); t:add(f.chunk_count, b(24, 4)); t:add(f.kept, b(28, 4)); t:add(f.bitmap_base, b(32, 4))
    t:add(f.bitmap_bytes, b(36, 2)); t:add(f.reserved16, b(38, 2))
    return 40, b(36, 2):uint(), f.bitmap,
      string.format("round %d shard %d %s, kept %d/%d", b(12, 4):uint(), b(20, 2):uint(),
                    close_reasons[b(22, 1):uint()] or "?", b(28, 4):uint(), b(24, 4):uint())
  end },
  [4] = { len = 24, add = function(t, b)  -- CONTROL
    t:add(f.channel, b(12, 2)); t:add(f.payload_len, b(14, 2)); t:add(f.seq, b(16, 4)); t:add(f.ack, b(20, 4))
    t:add(f.session, b(24, 4)); t:add(f.send_ts, b(28, 8))
    return 36, b(14, 2):uint(), f.payload,
      string.format("channel %d seq %d ack %d", b(12, 2):uint(), b(16, 4):uint(), b(20, 4):uint())
  end },
  [5] = { len = 4, add = function(t, b)  -- REJECT
    t:add(f.reject_reason, b(12, 1)); t:add(f.min_version, b(13, 1)); t:add(f.max_version, b(14, 1))
    t:add(f.offending, b(15, 1))
    return 16, 0, nil, string.format("version %d not in %d..%d", b(15, 1):uint(), b(13, 1):uint(), b(14, 1):uint())
  end },
  [6] = { len = 28, add = function(t, b)  -- PROBE
    t:add(f.train, b(12, 4)); t:add(f.probe_seq, b(16, 2)); t:add(f.probe_count, b(18, 2)); t:add(f.dst_node, b(20, 2))
    t:add(f.payload_len, b(22, 2)); t:add(f.send_ts, b(24, 8)); t:add(f.rx_ts, b(32, 8))
    return 40, b(22, 2):uint(), f.payload,
      string.format("train %d packet %d/%d to site %d", b(12, 4):uint(), b(16, 2):uint(), b(18, 2):uint(), b(20, 2):uint())
  end },
}

function ltp.dissector(buf, pinfo, tree)
  if buf:len() < 12 then
    local t = tree:add(ltp, buf())
    t:add_proto_expert_info(e_short)
    return
  end
  pinfo.cols.protocol = "LTP"
  local t = tree:add(ltp, buf())
  t:add(f.magic, buf(0, 2))
  if buf(0, 2):uint() ~= 0x4c54 then
    t:add_proto_expert_info(e_magic)
    return
  end
  t:add(f.version, buf(2, 1))
  local ty = buf(3, 1):uint()
  t:add(f.type, buf(3, 1))
  local fl = t:add(f.flags, buf(4, 1))
  fl:add(f.flag_retx, buf(4, 1)); fl:add(f.flag_tag, buf(4, 1)); fl:add(f.flag_more, buf(4, 1))
  fl:add(f.flag_partial, buf(4, 1)); fl:add(f.flag_app_limited, buf(4, 1)); fl:add(f.flag_held, buf(4, 1))
  t:add(f.reserved, buf(5, 1)); t:add(f.src_node, buf(6, 2)); t:add(f.job, buf(8, 4))
  local body = bodies[ty]
  local name = types[ty] or ("type " .. ty)
  if not body then
    t:add_proto_expert_info(e_type)
    pinfo.cols.info = string.format("LTP %s from site %d (unknown type)", name, buf(6, 2):uint())
    return
  end
  if buf:len() < 12 + body.len then
    t:add_proto_expert_info(e_short)
    pinfo.cols.info = string.format("LTP %s from site %d (truncated)", name, buf(6, 2):uint())
    return
  end
  local off, vlen, vfield, summary = body.add(t, buf)
  if vfield and vlen > 0 and off + vlen <= buf:len() then t:add(vfield, buf(off, vlen)) end
  -- Sealed: a 24-byte trailer (epoch, lane, packet number, tag) ends the datagram; with
  -- encryption the variable part above is ciphertext.
  if bit.band(buf(4, 1):uint(), 0x02) ~= 0 and buf:len() >= off + 24 then
    local tr = buf:len() - 24
    t:add(f.tr_epoch, buf(tr, 4)); t:add(f.tr_lane, buf(tr + 4, 1)); t:add(f.tr_pn, buf(tr + 5, 3))
    t:add(f.tag, buf(tr + 8, 16))
  end
  t:append_text(string.format(", %s from site %d job %d: %s", name, buf(6, 2):uint(), buf(8, 4):uint(), summary))
  pinfo.cols.info = string.format("LTP %s site %d job %d %s", name, buf(6, 2):uint(), buf(8, 4):uint(), summary)
end

local registered = 0
local function register()
  local udp = DissectorTable.get("udp.port")
  if registered ~= 0 then udp:remove(registered, ltp) end
  udp:add(ltp.prefs.port, ltp)
  registered = ltp.prefs.port
end
function ltp.prefs_changed() register() end
register()
