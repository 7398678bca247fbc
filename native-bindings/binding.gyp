{
  "targets": [
    {
      "target_name": "symfence_native",
      "sources": ["symfence_native.c", "spawn_group.c"],
      "cflags": ["-std=gnu11", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"],
      "defines": ["NAPI_DISABLE_CPP_EXCEPTIONS"]
    },
    {
      "target_name": "symfence_spawn_shim",
      "type": "executable",
      "sources": ["spawn_shim.c"],
      "cflags": ["-std=gnu11", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"]
    }
  ]
}
