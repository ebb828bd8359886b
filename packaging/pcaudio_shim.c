/* A stand-in for libpcaudio (espeak-ng's audio output library) for the GPU kit's carried
 * espeak-ng. The kit's espeak-ng only writes WAV to a pipe or file (--stdout, -w) and never
 * opens an audio device, but its library is linked against libpcaudio, whose real build pulls in
 * ALSA, PulseAudio and X11 libraries that a bare GPU image lacks. Opening a device here fails
 * cleanly instead. Built by `packaging/gpu_kit.sh prepare`; never installed anywhere else. */
#include <stddef.h>

struct audio_object;

struct audio_object *create_audio_device_object(const char *device, const char *application_name,
                                                const char *description) { return NULL; }
int audio_object_open(struct audio_object *object, int format, unsigned rate, unsigned char channels) { return -1; }
void audio_object_close(struct audio_object *object) {}
void audio_object_destroy(struct audio_object *object) {}
int audio_object_write(struct audio_object *object, const void *data, size_t bytes) { return -1; }
int audio_object_drain(struct audio_object *object) { return -1; }
int audio_object_flush(struct audio_object *object) { return -1; }
const char *audio_object_strerror(struct audio_object *object, int error) { return "no audio output in the GPU kit"; }
