/* What every histogram launcher (and the backend) asks of a task before picking a path. */
#include "kernels/cuda/ata_hist_kernels.h"

extern "C" bool cr_hist_is_byte_identity(const cr_hist_dev *h, cr_dtype dt)
{
    return dt == CR_DT_U8 && h->bins == 256 && h->lo == 0.0 && h->hi == 256.0;
}
