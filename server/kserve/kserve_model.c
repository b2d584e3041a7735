/* The three KServe models crunchd serves, one per op, and the datatype names of the protocol. */
#include <string.h>

#include "server/kserve/kserve_internal.h"

static const char *const matrix_types[] = {"FP32", "FP64", NULL};
/* GEMM also takes half precision (FP32 accumulation; the output in the inputs' datatype). */
static const char *const gemm_types[] = {"FP32", "FP64", "FP16", "BF16", NULL};
static const char *const hist_types[] = {"UINT8", "FP32", "FP64", NULL};
static const char *const count_types[] = {"UINT64", NULL};

/* Matrices follow the inputs' datatype; counts are always 64-bit; edges are numpy's: FP32 for FP32
 * data, FP64 for any other (kernels/hist_range.h). */
static const cr_ks_model models[] = {
    {"gemm", CR_OP_GEMM,
     {{"a", gemm_types, 2, false}, {"b", gemm_types, 2, false}, {"c", gemm_types, 2, true}},
     3, {{"c", gemm_types, 2, false}}, 1},
    {"ata", CR_OP_ATA, {{"a", matrix_types, 2, false}}, 1, {{"c", matrix_types, 2, false}}, 1},
    {"histogram", CR_OP_HISTOGRAM, {{"data", hist_types, 1, false}}, 1,
     {{"counts", count_types, 1, false}, {"edges", matrix_types, 1, true}}, 2},
};

const cr_ks_model *cr_ks_models(size_t *n)
{
    *n = sizeof models / sizeof models[0];
    return models;
}

const cr_ks_model *cr_ks_model_find(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (strlen(models[i].name) == len && memcmp(models[i].name, name, len) == 0)
            return &models[i];
    return NULL;
}

int cr_ks_input_index(const cr_ks_model *m, const char *name)
{
    for (int i = 0; i < m->n_inputs; i++)
        if (strcmp(m->inputs[i].name, name) == 0)
            return i;
    return -1;
}

int cr_ks_output_index(const cr_ks_model *m, const char *name)
{
    for (int i = 0; i < m->n_outputs; i++)
        if (strcmp(m->outputs[i].name, name) == 0)
            return i;
    return -1;
}

static const struct {
    const char *name;
    cr_dtype dt;
} dtypes[] = {
    {"FP32", CR_DT_F32}, {"FP64", CR_DT_F64}, {"UINT8", CR_DT_U8}, {"INT8", CR_DT_I8},
    {"UINT16", CR_DT_U16}, {"INT16", CR_DT_I16}, {"UINT32", CR_DT_U32}, {"INT32", CR_DT_I32},
    {"INT64", CR_DT_I64}, {"UINT64", CR_DT_U64}, {"FP16", CR_DT_F16}, {"BF16", CR_DT_BF16},
};

const char *cr_ks_datatype_name(cr_dtype dt)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].dt == dt)
            return dtypes[i].name;
    return NULL;
}

int cr_ks_datatype_parse(const char *name, cr_dtype *out)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(dtypes[i].name, name) == 0) {
            *out = dtypes[i].dt;
            return 0;
        }
    return -1;
}

size_t cr_ks_extensions(const cr_backend *b, const char **out, size_t max)
{
    static const char *const always[] = {"binary_tensor_data", "system_shared_memory",
                                         "statistics", /* perf_analyzer then splits queue and compute */
                                         "model_configuration", "model_repository"};
    size_t n = 0;
    for (size_t i = 0; i < sizeof always / sizeof always[0] && n < max; i++)
        out[n++] = always[i];
    if (b && b->ipc_open && n < max)
        out[n++] = "cuda_shared_memory";
    return n;
}
