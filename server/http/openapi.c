/* GET /openapi.yaml: the API's contract, api/openapi.yaml, served by the daemon it describes
 * (built in with .incbin, so the binary and its spec cannot drift; the Makefile rebuilds this
 * file when the spec changes, and tests/http/test_openapi.py checks the bytes are equal). */
#include "server/http/openapi.h"

#include <stdlib.h>
#include <string.h>

#include "server/http/answer_coding.h"
#include "server/http/respond.h"

__asm__(".section .rodata\n"
        ".global cr_openapi_yaml\n"
        "cr_openapi_yaml:\n"
        ".incbin \"api/openapi.yaml\"\n"
        ".global cr_openapi_yaml_end\n"
        "cr_openapi_yaml_end:\n"
        ".byte 0\n"
        ".previous\n");

extern const char cr_openapi_yaml[], cr_openapi_yaml_end[];

enum MHD_Result cr_route_openapi(cr_conn *c)
{
    cr_span spec = {cr_openapi_yaml, (size_t)(cr_openapi_yaml_end - cr_openapi_yaml)};
    struct MHD_Response *r = cr_answer_response(c, "application/yaml", &spec, 1, NULL, NULL);
    return r ? cr_queue(c, 200, r) : MHD_NO;
}
