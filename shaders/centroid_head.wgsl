// The two steps of the centroid LM head of Gemma 4's E-series assistants (use_ordered_embeddings;
// docs/GEMMA4-FAMILY.md section 7) that no dense kernel has:
//   select: the top-K clusters of the centroid logits [C] and the tokens they own (token_ordering rows), in
//           cluster order, into selected [K * per];
//   pick:   the drafted token, selected[best] for the argmax `best` over the selected logits.
// The centroid logits and the selected logits themselves are dense-engine matmuls (src/model/gemma4/e-series/centroid-head-op.ts).
// CPU twin: src/reference/gemma4/e-series/centroid-head.ts.
// Relaxed-math exactness: one stream. Comparisons and copies for one row (the assistant's draft step).
override WG: u32 = 256u;

struct Params {
  C: u32,         // centroids
  K: u32,         // clusters kept (centroid_intermediate_top_k)
  per: u32,       // tokens per cluster (vocab / C)
  ord_stride: u32, // u32 words per token_ordering entry: 1 (I32) or 2 (I64, little endian: the low word)
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> ordering: array<u32>;
@group(0) @binding(3) var<storage, read_write> selected: array<u32>;
@group(0) @binding(4) var<storage, read_write> clusters: array<u32>;
@group(0) @binding(5) var<storage, read> best: array<u32>;
@group(0) @binding(6) var<storage, read_write> token: array<u32>;

// K is at most MAX_K (centroid-head-op.ts refuses more: a workgroup array needs a fixed size).
const MAX_K: u32 = 256u;
var<workgroup> chosen: array<u32, MAX_K>;

// NaN by bit pattern: compilers may assume x != x is false.
fn is_nan(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u; }

// Whether centroid j ranks before centroid i: larger logit first, equal logits by lower index (torch.topk's
// order on ties in practice, and the reference's), NaN after every number. A total order, so every rank
// below is distinct and the result does not depend on how invocations share the work.
fn before(j: u32, i: u32) -> bool {
  let vj = logits[j];
  let vi = logits[i];
  let nj = is_nan(vj);
  let ni = is_nan(vi);
  if (nj != ni) { return ni; }
  if (nj || vj == vi) { return j < i; }
  return vj > vi;
}

// One workgroup. Each centroid's rank is the number of centroids before it (C^2 comparisons: 4M for the real
// 2048, a few microseconds on a GPU, and no sort network whose shape would depend on C); those ranked below K
// are the chosen clusters, written at their rank, i.e. by descending logit.
@compute @workgroup_size(WG)
fn select_tokens(@builtin(local_invocation_index) lid: u32) {
  for (var i = lid; i < P.C; i += WG) {
    var rank = 0u;
    for (var j = 0u; j < P.C; j++) {
      if (j != i && before(j, i)) { rank++; }
    }
    if (rank < P.K) { chosen[rank] = i; }
  }
  workgroupBarrier();
  for (var r = lid; r < P.K; r += WG) { clusters[r] = chosen[r]; }
  let n = P.K * P.per;
  for (var s = lid; s < n; s += WG) {
    let r = s / P.per;
    let t = chosen[r] * P.per + (s - r * P.per);
    selected[s] = ordering[t * P.ord_stride];
  }
}

// The token of the best selected logit: mlx-vlm's MaskedEmbedder.argmax, vLLM's get_top_tokens. (argmax.wgsl's
// index is below K * per; the clamp keeps a read in bounds whatever the buffer holds.)
@compute @workgroup_size(1)
fn pick() {
  // argmax.wgsl's NAN_ROW (the scored logits hold a NaN) passes through for the host to refuse (src/model/nan-row.ts)
  let nan_row = 0xfffffffeu;
  token[0] = select(selected[min(best[0], P.K * P.per - 1u)], nan_row, best[0] == nan_row);
}
