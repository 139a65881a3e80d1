// NCCL's topology XML (the files NCCL_TOPO_FILE reads and NCCL_TOPO_DUMP_FILE writes) to and from
// a System. The reader is weft's own small XML parser (elements, attributes in '' or "", self-closing
// tags, comments, the <?xml ...?> prolog, the five named entities and &#N; / &#xN;); it does not read
// DOCTYPEs or CDATA sections and does not normalise whitespace inside attribute values.
//
// What becomes what (docs/TOPOLOGY.md, "NCCL topology files", has the full list):
//   <cpu numaid=N>            a kCpu vertex "cpu<N>", numa N; every pair of CPUs gets a kSmp link
//   <pci busid=B> (bridge,    a kPciSwitch vertex named B (lower case)
//     or holding <pci>s)
//   <pci busid=B><gpu>        a kGpu vertex named B; its <nvlink target=T count=C> elements become
//                             kNvLink links to the GPU T, or to a kNvSwitch vertex named T created for
//                             the first nvlink that names it
//   <pci busid=B><nic><net>   one kNic vertex per <net>, named by the net's name
//   <nic><net> under a <cpu>  NICs hanging directly off the CPU (or off a bridge <pci>)
// Attributes that become no field are kept in Vertex::attrs, in file order, and written back: those
// of <cpu> and <pci> as they are, those of <gpu>, <nic> and <net> as "gpu.sm", "nic.x", "net.port".
// A NIC from a <pci> keeps that pci's bus id as its "busid" attribute.
// weft's own attributes, ignored by NCCL: package, cores, threads on <cpu> and rail on <net>.
// Every vertex gets machine 0.
//
// Errors name the place: "<source>:<line>: <what is wrong>". A malformed file is an error, never a
// crash, whatever its bytes.
//
// Thread-safety: free functions on values; no shared state.
#pragma once

#include <string>
#include <string_view>

#include "topology/system.h"
#include "weft/status.h"

namespace weft::topology {

// Reads NCCL topology XML. `source_name` (a path, "<env NCCL_TOPO_FILE>") prefixes error messages.
Result<System> read_nccl_xml(std::string_view text, std::string_view source_name);
Result<System> load_nccl_xml(const std::string& path);

// Writes machine `machine` of `system` as NCCL topology XML: each CPU and what hangs below it over
// PCIe links (a tree, children in link order), GPUs with their NVLinks (to GPUs and NVSwitches).
// What the format cannot hold is left out: vertices no CPU reaches over PCIe, network switches and
// links, NVLinks to CPUs. PCI switches, GPUs and NVSwitches whose names are not PCI bus ids (the
// synthetic systems') get one made from the machine and vertex id, so the file reads back.
// read_nccl_xml(write_nccl_xml(read_nccl_xml(x))) == read_nccl_xml(x), and writing that again
// gives the same text.
std::string write_nccl_xml(const System& system, int machine = 0);
// write_nccl_xml to a file (NCCL_TOPO_DUMP_FILE); an error names the path.
Status save_nccl_xml(const System& system, const std::string& path, int machine = 0);

// NCCL's bandwidth conventions, shared with discovery (discover.h). All bytes/s per direction.
//
// A PCIe link: lanes x rate x encoding / 8, with 8b/10b for 2.5 and 5 GT/s, 128b/130b for 8 to 32 GT/s
// and 242/256 (flit mode) for 64 GT/s: Gen4 x16 = 31.5 GB/s, Gen5 x16 = 63.0 GB/s. `link_speed` is
// sysfs's "16.0 GT/s PCIe" (or "16 GT/s"); empty or "Unknown..." means 8 GT/s. `link_width` is a lane
// count; empty or "0" means 16. An error (plain message, no place) when either is not of that form.
Result<double> pcie_link_bandwidth(std::string_view link_speed, std::string_view link_width);
// The "<rate> GT/s PCIe" and lane count whose pcie_link_bandwidth is within `tolerance` (relative)
// of `bandwidth`: widths `first_width` (when given), then 16, 8, 4, 2, 1, 32, 12, each with rates
// 2.5 to 64 GT/s. False when none is.
bool pcie_speed_for(double bandwidth, double tolerance, std::string* speed, std::string* width,
                    std::string_view first_width = {});
// PCI addresses as NCCL's files and weft's vertex names write them, "DDDD:BB:DD.F" (hex, function
// 0-7): whether `s` is one (either case), and the one of these numbers (lower case; a number out
// of its field's range gives a string is_bus_id rejects).
bool is_bus_id(std::string_view s);
std::string format_bus_id(unsigned domain, unsigned bus, unsigned device, unsigned function);
// Another writer's PCI address in that form: NVML's "00000000:1B:00.0" or CUDA's "0000:1B:00.0"
// become "0000:1b:00.0"; "" when `text` is not a PCI address (fields out of range included).
std::string normal_bus_id(std::string_view text);
// The bandwidth pcie_link_bandwidth gives without speed and width: Gen3 x16, 15.75 GB/s.
double default_pcie_bandwidth();
// One NVLink of a GPU with compute capability `sm` (90 for H100), NCCL's per-generation values:
// 18 GB/s (SM60), 20 (SM70, SM80), 12 (SM86), 20.6 (SM90), 40.1 (SM100 and later); unknown (sm <= 0)
// as SM80.
double nvlink_bandwidth(int sm);
// The CPU-to-CPU interconnect between two kCpu vertices, from their "arch", "vendor", "familyid" and
// "modelid" attributes as NCCL reads them: the smaller of the two CPUs' values. Intel (family 6):
// 6 GB/s before Skylake, 10 from model 0x55, 22 from Sapphire Rapids (0x8F), 40 from Emerald Rapids
// (0xCF, and Granite Rapids 0xAD-0xAF); AMD: 16 (family <= 24), 24 (25, Zen 3/4), 32 (26 and later,
// Zen 5); Zhaoxin 9 (YongFeng) or 6; POWER 32; ARM 6; anything unknown 6.
double smp_bandwidth(const Vertex& a, const Vertex& b);

// Latencies the reader and discovery give links (the file has none), seconds.
inline constexpr double kPciLatency = 1e-6;
inline constexpr double kNvLinkLatency = 0.5e-6;
inline constexpr double kSmpLatency = 0.5e-6;

}  // namespace weft::topology
