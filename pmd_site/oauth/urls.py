"""Where OAuth clients find pmd (the well-known documents) and the endpoints they call."""

from django.urls import path

from pmd_site.oauth import views

urlpatterns = [
    path(".well-known/oauth-protected-resource", views.protected_resource, name="oauth_resource"),
    path(".well-known/oauth-protected-resource/<str:resource>", views.protected_resource, name="oauth_resource_of"),
    path(".well-known/oauth-authorization-server", views.authorization_server_metadata, name="oauth_metadata"),
    path("oauth/authorize", views.authorize, name="oauth_authorize"),
    path("oauth/token", views.token, name="oauth_token"),
    path("oauth/register", views.register, name="oauth_register"),
    path("oauth/revoke", views.revoke, name="oauth_revoke"),
]
